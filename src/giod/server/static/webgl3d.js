// The display's fast views: a small renderer in plain WebGL, no library, for the 3-D view and for the
// r-phi and r-z projections (the same renderer seen through an orthographic, pannable 2-D camera).
//
// It draws what display.js describes for plotly (scatter3d/scatter lines and markers, filled 2-D
// polygons, mesh3d triangles, in the same trace objects), so both renderers show the same scene.
// Every trace becomes one vertex buffer per part and one to five draw calls: a cold page has its
// three views within a few tens of milliseconds of the scene, where plotly.js must first load and
// compile (seconds, in software).
//
// Lines are GL line segments (1 pixel wide everywhere); a wider line is the same segments drawn again
// shifted by a pixel. Markers are GL points, cut into discs or diamonds in the fragment shader. Nothing
// is lit: colours are flat. In 3-D, triangles are semi-transparent surfaces drawn after everything
// opaque, without writing depth. In 2-D, traces are drawn in their order, and a filled polygon is
// filled by the stencil buffer with the non-zero winding rule, as SVG fills it: every polygon is a
// fan of triangles from its first vertex, whatever its shape (an annulus, a wedge).

const VERTEX = `
attribute vec3 a_pos;
uniform mat4 u_mvp;
uniform vec2 u_offset;
uniform float u_size;
void main() {
  gl_Position = u_mvp * vec4(a_pos, 1.0);
  gl_Position.xy += u_offset * gl_Position.w;
  gl_PointSize = u_size;
}`;
const FRAGMENT = `
precision mediump float;
uniform vec4 u_color;
uniform vec4 u_edge;
uniform float u_edgeWidth;
uniform int u_shape; // 0: flat (lines, triangles, square points); 1: disc; 2: diamond
void main() {
  if (u_shape == 0) { gl_FragColor = u_color; return; }
  vec2 p = gl_PointCoord * 2.0 - 1.0;
  float d = u_shape == 1 ? length(p) : abs(p.x) + abs(p.y);
  if (d > 1.0) discard;
  gl_FragColor = d > 1.0 - u_edgeWidth ? u_edge : u_color;
}`;

const FOVY = Math.PI / 4; // plotly's 3-D scene uses the same field of view
const SHAPES = { square: 0, circle: 1, diamond: 2, arrow: 2 };

/** [r, g, b, a] in 0..1 of "#rrggbb", "rgb(…)" or "rgba(…)". */
export function rgba(color) {
  const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color || "");
  if (hex) return [...[1, 2, 3].map((i) => parseInt(hex[i], 16) / 255), 1];
  const fn = /^rgba?\(([^)]*)\)$/i.exec(color || "");
  if (fn) {
    const v = fn[1].split(",").map(Number);
    return [v[0] / 255, v[1] / 255, v[2] / 255, v.length > 3 ? v[3] : 1];
  }
  return [1, 1, 1, 1];
}

/** Segment end points of plotly polylines (null between lines), with each end's point number. */
function segments(xs, ys, zs) {
  const n = xs.length;
  let count = 0;
  for (let i = 1; i < n; i++) if (xs[i] !== null && xs[i - 1] !== null) count++;
  const pos = new Float32Array(6 * count), point = new Int32Array(2 * count);
  for (let i = 1, o = 0; i < n; i++) {
    if (xs[i] === null || xs[i - 1] === null) continue;
    pos[3 * o] = xs[i - 1]; pos[3 * o + 1] = ys[i - 1]; pos[3 * o + 2] = zs ? zs[i - 1] : 0; point[o++] = i - 1;
    pos[3 * o] = xs[i]; pos[3 * o + 1] = ys[i]; pos[3 * o + 2] = zs ? zs[i] : 0; point[o++] = i;
  }
  return { pos, point };
}

/** Segments cut into dashes of `on` data units every `on + off` (plotly's dash is in pixels: at the
 * views' first zoom a data unit is about a pixel), keeping each piece's point numbers. */
function dashed({ pos, point }, on, off) {
  const outPos = [], outPoint = [];
  for (let s = 0; s < point.length; s += 2) {
    const a = pos.subarray(3 * s, 3 * s + 3), b = pos.subarray(3 * s + 3, 3 * s + 6);
    const len = Math.hypot(b[0] - a[0], b[1] - a[1], b[2] - a[2]) || 1;
    for (let t = 0; t < len; t += on + off) {
      const u = t / len, v = Math.min(len, t + on) / len;
      for (const w of [u, v]) outPos.push(a[0] + w * (b[0] - a[0]), a[1] + w * (b[1] - a[1]), a[2] + w * (b[2] - a[2]));
      outPoint.push(point[s], point[s + 1]);
    }
  }
  return { pos: new Float32Array(outPos), point: new Int32Array(outPoint) };
}

/** Arrow heads (plotly's "arrow" marker, angleref "previous") as triangles in the plane, `size` data
 * units long, at each point of a size above zero, pointing away from the point before it. */
function arrowHeads(xs, ys, sizes, size) {
  const out = [];
  for (let i = 1; i < xs.length; i++) {
    if (xs[i] === null || xs[i - 1] === null || (sizes && !(sizes[i] > 0))) continue;
    const dx = xs[i] - xs[i - 1], dy = ys[i] - ys[i - 1], l = Math.hypot(dx, dy) || 1, ux = dx / l, uy = dy / l;
    const L = 1.4 * size, W = 0.6 * size, bx = xs[i] - ux * L, by = ys[i] - uy * L;
    out.push(xs[i], ys[i], 0, bx - uy * W, by + ux * W, 0, bx + uy * W, by - ux * W, 0);
  }
  return { pos: new Float32Array(out), point: null };
}

/** Marker positions; with a size per marker, only those of a size above zero (an arrow's head, not its tail). */
function points(xs, ys, zs, sizes) {
  const keep = [];
  for (let i = 0; i < xs.length; i++) if (xs[i] !== null && (!sizes || sizes[i] > 0)) keep.push(i);
  const pos = new Float32Array(3 * keep.length), point = new Int32Array(keep);
  keep.forEach((i, a) => { pos[3 * a] = xs[i]; pos[3 * a + 1] = ys[i]; pos[3 * a + 2] = zs ? zs[i] : 0; });
  return { pos, point };
}

function triangles(t) {
  const n = t.i.length, pos = new Float32Array(9 * n);
  for (let a = 0; a < n; a++) {
    for (const [q, v] of [[0, t.i[a]], [1, t.j[a]], [2, t.k[a]]]) {
      const o = 9 * a + 3 * q;
      pos[o] = t.x[v]; pos[o + 1] = t.y[v]; pos[o + 2] = t.z[v];
    }
  }
  return { pos, point: null };
}

/** Each polygon (null between polygons) as a fan of triangles from its first vertex. */
function fans(xs, ys) {
  const out = [];
  for (let s = 0; s < xs.length;) {
    let e = s;
    while (e < xs.length && xs[e] !== null) e++;
    for (let i = s + 1; i + 1 < e; i++) out.push(xs[s], ys[s], 0, xs[i], ys[i], 0, xs[i + 1], ys[i + 1], 0);
    s = e + 1;
  }
  return { pos: new Float32Array(out), point: null };
}

/** What a plotly trace is to this renderer: its parts, each a GL mode, vertices, colour and size. */
function convert(trace) {
  const opacity = trace.opacity ?? 1;
  if (trace.type === "mesh3d") {
    const [r, g, b] = rgba(trace.color);
    return [{ mode: "triangles", ...triangles(trace), color: [r, g, b], alpha: opacity }];
  }
  const mode = String(trace.mode), out = [];
  if (trace.fill === "toself") {
    const [r, g, b, a] = rgba(trace.fillcolor);
    out.push({ mode: "fill", ...fans(trace.x, trace.y), color: [r, g, b], alpha: a * opacity });
  }
  if (mode.includes("lines") && (trace.line.width ?? 2) > 0) {
    const [r, g, b] = rgba(trace.line.color);
    let s = segments(trace.x, trace.y, trace.z);
    if (trace.line.dash === "dash") s = dashed(s, 12, 8);
    out.push({ mode: "lines", ...s, color: [r, g, b], alpha: opacity, width: trace.line.width || 1 });
  }
  if (mode.includes("markers")) {
    const m = trace.marker, sizes = Array.isArray(m.size) ? m.size : null;
    const s = points(trace.x, trace.y, trace.z, sizes);
    const shown = sizes ? sizes.filter((v) => v > 0) : [];
    const size = sizes ? shown.reduce((a, b) => a + b, 0) / Math.max(1, shown.length) : m.size || 6;
    const [r, g, b] = rgba(m.color), line = m.line && m.line.width ? m.line : null;
    if (m.symbol === "arrow" && !trace.z) {
      out.push({ mode: "triangles", ...arrowHeads(trace.x, trace.y, sizes, size), color: [r, g, b], alpha: opacity });
      return out;
    }
    out.push({ mode: "points", ...s, color: [r, g, b], alpha: opacity, size,
      shape: SHAPES[m.symbol ?? "circle"] ?? 1, edge: line ? rgba(line.color) : null,
      edgeWidth: line ? Math.min(1, (2 * line.width) / Math.max(1, size)) : 0 });
  }
  return out;
}

// ------------------------------------------------------------------ matrices (column-major)

function multiply(a, b) {
  const o = new Float32Array(16);
  for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) {
    let s = 0;
    for (let k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
    o[c * 4 + r] = s;
  }
  return o;
}

function perspective(fovy, aspect, near, far) {
  const f = 1 / Math.tan(fovy / 2), o = new Float32Array(16);
  o[0] = f / aspect; o[5] = f; o[10] = (far + near) / (near - far); o[11] = -1; o[14] = (2 * far * near) / (near - far);
  return o;
}

function lookAt(eye, up) {
  const norm = (v) => { const l = Math.hypot(...v) || 1; return v.map((x) => x / l); };
  const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  const f = norm(eye.map((x) => -x)), s = norm(cross(f, up)), u = cross(s, f);
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  return new Float32Array([s[0], u[0], -f[0], 0, s[1], u[1], -f[1], 0, s[2], u[2], -f[2], 0,
    -dot(s, eye), -dot(u, eye), dot(f, eye), 1]);
}

// ------------------------------------------------------------------ what both kinds of view share

function context(antialias, stencil) {
  const c = document.createElement("canvas");
  c.style.cssText = "display:block;width:100%;height:100%;cursor:grab;touch-action:none";
  return [c, c.getContext("webgl", { antialias, alpha: false, depth: true, stencil, preserveDrawingBuffer: false,
    powerPreference: "high-performance" })];
}

function compile(gl) {
  const shader = (kind, source) => {
    const s = gl.createShader(kind);
    gl.shaderSource(s, source);
    gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
    return s;
  };
  const program = gl.createProgram();
  gl.attachShader(program, shader(gl.VERTEX_SHADER, VERTEX));
  gl.attachShader(program, shader(gl.FRAGMENT_SHADER, FRAGMENT));
  gl.linkProgram(program);
  if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(program));
  gl.useProgram(program);
  const u = (name) => gl.getUniformLocation(program, name);
  const loc = { pos: gl.getAttribLocation(program, "a_pos"), mvp: u("u_mvp"), offset: u("u_offset"), size: u("u_size"),
    color: u("u_color"), edge: u("u_edge"), edgeWidth: u("u_edgeWidth"), shape: u("u_shape") };
  gl.enableVertexAttribArray(loc.pos);
  return loc;
}

const BUSY_VERTICES = 40000;
const OFFSETS = { 1: [[0, 0]], 2: [[0, 0], [1, 0], [0, 1]], 3: [[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]] };

/**
 * A WebGL canvas in `container` with the traces' buffers, drawing, picking and the view's public
 * methods; `camera` gives the matrix and the drawing area, `frame` draws the shown traces.
 * Null where the browser gives no WebGL context.
 */
function base(container, { stencil, pointScale }) {
  // in software (no GPU) every multisampled pixel is computed four times over; a GPU antialiases for free
  let [canvas, gl] = context(false, stencil);
  if (!gl) return null;
  const debug = gl.getExtension("WEBGL_debug_renderer_info");
  const rendererName = String(gl.getParameter(debug ? debug.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
  const software = /swiftshader|llvmpipe|softpipe|software/i.test(rendererName);
  if (!software) {
    const [c, g] = context(true, stencil);
    if (g) {
      const lose = gl.getExtension("WEBGL_lose_context");
      if (lose) lose.loseContext();
      [canvas, gl] = [c, g];
    }
  }
  container.textContent = "";
  container.style.position = "relative";
  container.append(canvas);
  const loc = compile(gl);

  const traces = new Map(); // uid -> {trace, parts: [{mode, buffer, count, color, alpha, width|size, point}]}
  const core = {
    gl, canvas, loc, traces, mvp: null, width: 0, height: 0, dpr: 1,
    area: { left: 0, top: 0, width: 1, height: 1 }, // CSS pixels of the drawing inside the canvas
    camera: null, frame: null, pending: 0, clickHandlers: [], hoverHandlers: [],
  };

  core.resize = () => {
    core.dpr = Math.max(1, Math.min(2, window.devicePixelRatio || 1));
    core.width = Math.max(1, container.clientWidth); core.height = Math.max(1, container.clientHeight);
    canvas.width = Math.round(core.width * core.dpr); canvas.height = Math.round(core.height * core.dpr);
  };

  const release = (t) => { for (const p of t.parts) gl.deleteBuffer(p.buffer); };

  core.upload = (uid, trace) => {
    const old = traces.get(uid);
    if (old) release(old);
    const parts = trace._parts || convert(trace);
    delete trace._parts; // its arrays go to the GPU, and the trace may be drawn again
    for (const p of parts) {
      p.buffer = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, p.buffer);
      gl.bufferData(gl.ARRAY_BUFFER, p.pos, gl.STATIC_DRAW);
      p.count = p.pos.length / 3;
      p.positions = p.pos; // kept for picking
      delete p.pos;
    }
    traces.set(uid, { trace, parts, overlay: view.overlay(uid) });
  };

  core.drawPart = (p) => {
    if (!p.count) return;
    gl.bindBuffer(gl.ARRAY_BUFFER, p.buffer);
    gl.vertexAttribPointer(loc.pos, 3, gl.FLOAT, false, 0, 0);
    gl.uniform4f(loc.color, p.color[0], p.color[1], p.color[2], p.alpha);
    if (p.mode === "points") {
      gl.uniform1i(loc.shape, p.shape);
      if (p.edge) gl.uniform4f(loc.edge, p.edge[0], p.edge[1], p.edge[2], p.alpha * p.edge[3]);
      gl.uniform1f(loc.edgeWidth, p.edge ? p.edgeWidth : 0);
      gl.uniform1f(loc.size, p.size * core.dpr * pointScale);
      gl.uniform2f(loc.offset, 0, 0);
      gl.drawArrays(gl.POINTS, 0, p.count);
      gl.uniform1i(loc.shape, 0);
      return;
    }
    gl.uniform1f(loc.size, 1);
    if (p.mode === "fill") {
      // non-zero winding into the stencil (front faces count up, back faces down), then the colour where
      // it is not zero, resetting it as it goes: each pixel is blended once, holes stay empty
      gl.uniform2f(loc.offset, 0, 0);
      gl.enable(gl.STENCIL_TEST);
      gl.colorMask(false, false, false, false);
      gl.stencilFunc(gl.ALWAYS, 0, 0xff);
      gl.stencilOpSeparate(gl.FRONT, gl.KEEP, gl.KEEP, gl.INCR_WRAP);
      gl.stencilOpSeparate(gl.BACK, gl.KEEP, gl.KEEP, gl.DECR_WRAP);
      gl.drawArrays(gl.TRIANGLES, 0, p.count);
      gl.colorMask(true, true, true, true);
      gl.stencilFunc(gl.NOTEQUAL, 0, 0xff);
      gl.stencilOp(gl.KEEP, gl.KEEP, gl.ZERO);
      gl.drawArrays(gl.TRIANGLES, 0, p.count);
      gl.disable(gl.STENCIL_TEST);
      return;
    }
    // in software every pass costs about a microsecond per segment: a busy trace (a pile-up event's
    // tracks, 50,000 cells) is drawn once, one pixel wide
    const passes = p.mode !== "lines" || (software && p.count > BUSY_VERTICES) ? 1
      : Math.max(1, Math.min(3, Math.round(p.width / 2)));
    const offsets = OFFSETS[passes];
    const a = core.area;
    for (const [dx, dy] of offsets) {
      gl.uniform2f(loc.offset, (2 * dx) / (a.width * core.dpr), (2 * dy) / (a.height * core.dpr));
      gl.drawArrays(p.mode === "lines" ? gl.LINES : gl.TRIANGLES, 0, p.count);
    }
  };

  core.render = () => {
    core.pending = 0;
    if (!core.camera) return; // a view given up before it started
    if (canvas.width !== Math.round(container.clientWidth * core.dpr) || !core.width) core.resize();
    gl.viewport(0, 0, canvas.width, canvas.height);
    const bg = rgba(view.background);
    gl.clearColor(bg[0], bg[1], bg[2], 1);
    gl.clearStencil(0);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT | gl.STENCIL_BUFFER_BIT);
    core.camera(); // sets core.mvp and core.area
    gl.uniformMatrix4fv(loc.mvp, false, core.mvp);
    core.frame([...traces.values()].filter((t) => t.trace.visible !== false));
    // hand the commands to the GPU process now: it draws (in software, on another core) while this
    // thread builds the next view
    gl.flush();
  };

  core.schedule = () => { if (!core.pending) core.pending = requestAnimationFrame(core.render); };

  /** CSS-pixel position in the canvas of a data point, or null behind the camera. */
  const screen = (x, y, z) => {
    const m = core.mvp;
    if (!m) return null;
    const w = m[3] * x + m[7] * y + m[11] * z + m[15];
    if (w <= 0) return null;
    const a = core.area;
    return [a.left + ((m[0] * x + m[4] * y + m[8] * z + m[12]) / w + 1) * 0.5 * a.width,
      a.top + (1 - (m[1] * x + m[5] * y + m[9] * z + m[13]) / w) * 0.5 * a.height];
  };

  /** The nearest drawn vertex of a pickable trace within `radius` CSS pixels of (px, py): {uid, point}. */
  const pick = (px, py, pickable, radius = 8) => {
    if (!core.mvp) return null;
    let best = null, bestD = radius * radius;
    for (const [uid, t] of traces) {
      if (t.trace.visible === false || !pickable(uid)) continue;
      for (const p of t.parts) {
        if (!p.point) continue;
        const v = p.positions;
        for (let i = 0, n = p.count; i < n; i++) {
          const s = screen(v[3 * i], v[3 * i + 1], v[3 * i + 2]);
          if (!s) continue;
          const d = (s[0] - px) ** 2 + (s[1] - py) ** 2;
          if (d < bestD) { bestD = d; best = { uid, point: p.point[i] }; }
        }
      }
    }
    return best;
  };

  core.drag = null; // set by the view: (dx, dy, x, y) of a pointer moved with its button down
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, moved: false };
    canvas.setPointerCapture(e.pointerId);
  });
  let hover = null; // the last pointer position not yet looked at, once a frame
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) {
      if (!core.hoverHandlers.length) return;
      const box = canvas.getBoundingClientRect(), first = !hover;
      hover = [e.clientX - box.left, e.clientY - box.top];
      if (first) {
        requestAnimationFrame(() => {
          const [x, y] = hover;
          hover = null;
          for (const f of core.hoverHandlers) f(x, y);
        });
      }
      return;
    }
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true; drag.x = e.clientX; drag.y = e.clientY;
    core.drag(dx, dy);
    core.schedule();
  });
  canvas.addEventListener("pointerup", (e) => {
    const was = drag;
    drag = null;
    if (!was || was.moved) return;
    const box = canvas.getBoundingClientRect();
    for (const f of core.clickHandlers) f(e.clientX - box.left, e.clientY - box.top);
  });
  new ResizeObserver(() => { core.resize(); core.schedule(); }).observe(container);

  const view = {
    canvas,
    background: "#000000",
    /** Whether a trace is drawn over everything (a highlight), not hidden behind what is in front. */
    overlay: () => false,
    /** The WebGL renderer's name, and whether it runs in software. */
    renderer: rendererName,
    software,
    /** Turn traces into this renderer's vertex arrays ahead of react(), e.g. while the page is idle. */
    prepare(list) { for (const t of list) t._parts = convert(t); },
    /** Replace every trace: the uid of each is kept for restyle() and visible(). */
    react(list) {
      for (const t of traces.values()) release(t);
      traces.clear();
      for (const t of list) core.upload(t.uid, t);
      core.render();
    },
    /** Replace the points of one trace (x, y, z) and draw again. */
    restyle(uid, patch) {
      const t = traces.get(uid);
      if (!t) return;
      core.upload(uid, { ...t.trace, ...patch });
      core.schedule();
    },
    visible(uid, on) {
      const t = traces.get(uid);
      if (t) { t.trace.visible = on; core.schedule(); }
    },
    render: () => core.render(),
    pick,
    onClick(f) { core.clickHandlers.push(f); },
    /** Call f(x, y) with the pointer's position over the view, at most once a frame, when no button is down. */
    onHover(f) { core.hoverHandlers.push(f); },
    /** CSS-pixel position of a data point inside the view (for scripts and tests). */
    project(x, y, z = 0) { return screen(x, y, z); },
    clear() {
      for (const t of traces.values()) release(t);
      traces.clear();
      core.render();
    },
  };
  core.view = view;
  core.resize();
  return core;
}

// ------------------------------------------------------------------ the 3-D view

/**
 * A 3-D view in `container`: `box` is the data's half extents [x, y, z] (shown as plotly's scene with
 * `aspect` ratios), `eye` the camera as in plotly's layout, `up` its up vector. Returns null where
 * the browser gives no WebGL context.
 */
export function createView(container, { box, aspect, eye, up }) {
  const core = base(container, { stencil: false, pointScale: 1.5 });
  if (!core) return null;
  const { gl } = core;
  const camera = { eye: [...eye], up: [...up], zoom: 1 };
  // plotly's scene puts the axes' ranges on a box of half side aspect / 2, seen from `eye`
  const scale = [aspect[0] / (2 * box[0]), aspect[1] / (2 * box[1]), aspect[2] / (2 * box[2])];
  const model = new Float32Array([scale[0], 0, 0, 0, 0, scale[1], 0, 0, 0, 0, scale[2], 0, 0, 0, 0, 1]);

  core.camera = () => {
    const eyeAt = camera.eye.map((v) => v * camera.zoom), dist = Math.hypot(...eyeAt);
    core.area = { left: 0, top: 0, width: core.width, height: core.height };
    core.mvp = multiply(perspective(FOVY, core.width / core.height, dist / 50, dist * 4),
      multiply(lookAt(eyeAt, camera.up), model));
  };
  core.frame = (shown) => {
    // opaque lines and points with depth; then semi-transparent surfaces, blended, writing no depth;
    // then the highlight and selection over everything, so that they are never hidden
    gl.enable(gl.DEPTH_TEST); gl.depthMask(true); gl.disable(gl.BLEND);
    for (const t of shown) if (!t.overlay) for (const p of t.parts) if (p.mode !== "triangles") core.drawPart(p);
    gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA); gl.depthMask(false);
    for (const t of shown) if (!t.overlay) for (const p of t.parts) if (p.mode === "triangles") core.drawPart(p);
    gl.disable(gl.DEPTH_TEST);
    for (const t of shown) if (t.overlay) for (const p of t.parts) core.drawPart(p);
    gl.depthMask(true);
  };
  // turntable: drag turns the camera around the beam's vertical axis and tilts it; the wheel zooms
  core.drag = (dx, dy) => {
    const [x, y, z] = camera.eye, r = Math.hypot(x, y, z);
    // spherical angles about the up axis (y): azimuth in the x-z plane, elevation towards y
    let az = Math.atan2(x, z), el = Math.asin(Math.max(-1, Math.min(1, y / r)));
    az -= dx * 0.008; el = Math.max(-1.5, Math.min(1.5, el + dy * 0.008));
    camera.eye = [r * Math.cos(el) * Math.sin(az), r * Math.sin(el), r * Math.cos(el) * Math.cos(az)];
  };
  core.canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    camera.zoom = Math.max(0.2, Math.min(5, camera.zoom * Math.exp(e.deltaY * 0.001)));
    core.schedule();
  }, { passive: false });
  return core.view;
}

// ------------------------------------------------------------------ the 2-D views

/** Grid step for about `n` lines over `span`: 1, 2 or 5 times a power of ten. */
function niceStep(span, n) {
  const raw = span / n, p = 10 ** Math.floor(Math.log10(raw)), f = raw / p;
  return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

/**
 * A 2-D view in `container`: data ranges `x` and `y` shown at one scale on both axes (as plotly's
 * `scaleanchor`), a grid with tick labels, axis titles `xTitle` and `yTitle`, and `margin` around the
 * plot in CSS pixels. Drag pans, the wheel zooms about the pointer, a double click goes back.
 * Returns null where the browser gives no WebGL context, or one without a stencil buffer.
 */
export function createView2d(container, { x, y, xTitle, yTitle, margin = { l: 46, r: 8, t: 22, b: 34 },
  grid = "#232833", axis = "#8a93a3" }) {
  const core = base(container, { stencil: true, pointScale: 1 });
  if (!core) return null;
  const { gl } = core;
  if (!gl.getContextAttributes().stencil) { // filled shapes need it: plotly.js draws this view instead
    core.canvas.remove();
    return null;
  }
  const home = { cx: (x[0] + x[1]) / 2, cy: (y[0] + y[1]) / 2, zoom: 1 };
  const cam = { ...home };
  const gridBuffer = gl.createBuffer(), gridColor = rgba(grid);
  const labels = document.createElement("div");
  labels.style.cssText = `position:absolute;inset:0;pointer-events:none;font-size:10px;color:${axis}`;
  container.append(labels);
  let ticksShown = "";

  const scale = () => { // CSS pixels per data unit
    const a = core.area;
    return cam.zoom * Math.min(a.width / (x[1] - x[0]), a.height / (y[1] - y[0]));
  };

  core.camera = () => {
    core.area = { left: margin.l, top: margin.t, width: Math.max(1, core.width - margin.l - margin.r),
      height: Math.max(1, core.height - margin.t - margin.b) };
    const s = scale(), hx = core.area.width / (2 * s), hy = core.area.height / (2 * s);
    core.mvp = new Float32Array([1 / hx, 0, 0, 0, 0, 1 / hy, 0, 0, 0, 0, 1, 0, -cam.cx / hx, -cam.cy / hy, 0, 1]);
  };

  function ticks() {
    const a = core.area, s = scale(), hx = a.width / (2 * s), hy = a.height / (2 * s);
    const x0 = cam.cx - hx, x1 = cam.cx + hx, y0 = cam.cy - hy, y1 = cam.cy + hy;
    const step = niceStep(Math.min(x1 - x0, y1 - y0), 5);
    const xs = [], ys = [], pos = [];
    for (let v = Math.ceil(x0 / step) * step; v <= x1; v += step) { xs.push(v); pos.push(v, y0, 0, v, y1, 0); }
    for (let v = Math.ceil(y0 / step) * step; v <= y1; v += step) { ys.push(v); pos.push(x0, v, 0, x1, v, 0); }
    return { xs, ys, pos: new Float32Array(pos) };
  }

  function drawLabels(t) {
    const key = `${core.width}x${core.height}:${t.xs.join()}|${t.ys.join()}|${cam.cx},${cam.cy},${cam.zoom}`;
    if (key === ticksShown) return; // rebuilt only when the view moved
    ticksShown = key;
    const a = core.area, out = [];
    const fmt = (v) => String(Math.round(v * 1e6) / 1e6);
    for (const v of t.xs) {
      const [sx] = core.view.project(v, cam.cy);
      out.push(`<span style="position:absolute;left:${sx}px;top:${a.top + a.height + 2}px;` +
        `transform:translateX(-50%)">${fmt(v)}</span>`);
    }
    for (const v of t.ys) {
      const [, sy] = core.view.project(cam.cx, v);
      out.push(`<span style="position:absolute;right:${core.width - a.left + 4}px;top:${sy}px;` +
        `transform:translateY(-50%)">${fmt(v)}</span>`);
    }
    out.push(`<span style="position:absolute;left:${a.left + a.width / 2}px;bottom:2px;transform:translateX(-50%);` +
      `font-size:11px">${xTitle}</span>`);
    out.push(`<span style="position:absolute;left:2px;top:${a.top + a.height / 2}px;font-size:11px;` +
      `writing-mode:vertical-rl;transform:translateY(-50%) rotate(180deg);white-space:nowrap">${yTitle}</span>`);
    labels.innerHTML = out.join("");
  }

  core.frame = (shown) => {
    const a = core.area, d = core.dpr;
    gl.viewport(Math.round(a.left * d), Math.round((core.height - a.top - a.height) * d), Math.round(a.width * d),
      Math.round(a.height * d));
    gl.disable(gl.DEPTH_TEST); gl.depthMask(false);
    gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA);
    const t = ticks();
    gl.bindBuffer(gl.ARRAY_BUFFER, gridBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, t.pos, gl.DYNAMIC_DRAW);
    core.drawPart({ mode: "lines", buffer: gridBuffer, count: t.pos.length / 3, color: gridColor, alpha: 1, width: 1 });
    // in the traces' order, as plotly stacks them; the highlight and selection last
    for (const tr of shown) if (!tr.overlay) for (const p of tr.parts) core.drawPart(p);
    for (const tr of shown) if (tr.overlay) for (const p of tr.parts) core.drawPart(p);
    gl.depthMask(true);
    drawLabels(t);
  };

  core.drag = (dx, dy) => {
    const s = scale();
    cam.cx -= dx / s; cam.cy += dy / s;
  };
  core.canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const box = core.canvas.getBoundingClientRect(), a = core.area, s = scale();
    // the data point under the pointer stays under it
    const px = cam.cx + (e.clientX - box.left - a.left - a.width / 2) / s;
    const py = cam.cy - (e.clientY - box.top - a.top - a.height / 2) / s;
    const f = Math.exp(-e.deltaY * 0.001);
    cam.zoom = Math.max(0.25, Math.min(200, cam.zoom * f));
    const k = scale() / s;
    cam.cx = px - (px - cam.cx) / k; cam.cy = py - (py - cam.cy) / k;
    core.schedule();
  }, { passive: false });
  core.canvas.addEventListener("dblclick", () => { Object.assign(cam, home); core.schedule(); });
  return core.view;
}

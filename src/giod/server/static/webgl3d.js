// The display's fast 3-D view: a small renderer in plain WebGL, no library.
//
// It draws what build3d() in display.js describes for plotly (scatter3d lines and markers, mesh3d
// triangles, in the same trace objects), so both renderers show the same scene. Every trace becomes
// one vertex buffer and one to five draw calls: a cold page has a 3-D frame within a few tens of
// milliseconds of the scene, where plotly.js must first load and compile (seconds, in software).
//
// Lines are GL line segments (1 pixel wide everywhere); a wider line is the same segments drawn again
// shifted by a pixel. Markers are square GL points. Nothing is lit: colours are flat, and triangles are
// semi-transparent surfaces drawn after everything opaque, without writing depth.

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
void main() { gl_FragColor = u_color; }`;

const FOVY = Math.PI / 4; // plotly's 3-D scene uses the same field of view

function rgb(color) {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color || "");
  return m ? [1, 2, 3].map((i) => parseInt(m[i], 16) / 255) : [1, 1, 1];
}

/** Segment end points of plotly polylines (null between lines), with each end's point number. */
function segments(xs, ys, zs) {
  const n = xs.length;
  let count = 0;
  for (let i = 1; i < n; i++) if (xs[i] !== null && xs[i - 1] !== null) count++;
  const pos = new Float32Array(6 * count), point = new Int32Array(2 * count);
  for (let i = 1, o = 0; i < n; i++) {
    if (xs[i] === null || xs[i - 1] === null) continue;
    pos[3 * o] = xs[i - 1]; pos[3 * o + 1] = ys[i - 1]; pos[3 * o + 2] = zs[i - 1]; point[o++] = i - 1;
    pos[3 * o] = xs[i]; pos[3 * o + 1] = ys[i]; pos[3 * o + 2] = zs[i]; point[o++] = i;
  }
  return { pos, point };
}

function points(xs, ys, zs) {
  const n = xs.length, pos = new Float32Array(3 * n), point = new Int32Array(n);
  for (let i = 0; i < n; i++) { pos[3 * i] = xs[i]; pos[3 * i + 1] = ys[i]; pos[3 * i + 2] = zs[i]; point[i] = i; }
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

/** What a plotly 3-D trace is to this renderer: GL mode, vertices, colour, size, line width. */
function convert(trace) {
  if (trace.type === "mesh3d") {
    return { mode: "triangles", ...triangles(trace), color: rgb(trace.color), alpha: trace.opacity ?? 1, width: 1 };
  }
  const lines = String(trace.mode).includes("lines"), markers = String(trace.mode).includes("markers");
  const out = [];
  if (lines) {
    const s = segments(trace.x, trace.y, trace.z);
    out.push({ mode: "lines", ...s, color: rgb(trace.line.color), alpha: 1, width: trace.line.width || 1 });
  }
  if (markers) {
    const s = points(trace.x, trace.y, trace.z), size = trace.marker.size;
    out.push({ mode: "points", ...s, color: rgb(trace.marker.color), alpha: 1,
      size: Array.isArray(size) ? size.reduce((a, b) => a + b, 0) / Math.max(1, size.length) : size || 2 });
  }
  return out.length === 1 ? out[0] : { mode: "group", parts: out };
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

// ------------------------------------------------------------------ the view

/**
 * A 3-D view in `container`: `box` is the data's half extents [x, y, z] (shown as plotly's scene with
 * `aspect` ratios), `eye` the camera as in plotly's layout, `up` its up vector. Returns null where
 * the browser gives no WebGL context.
 */
export function createView(container, { box, aspect, eye, up }) {
  const context = (antialias) => {
    const c = document.createElement("canvas");
    c.style.cssText = "display:block;width:100%;height:100%;cursor:grab;touch-action:none";
    return [c, c.getContext("webgl", { antialias, alpha: false, depth: true, preserveDrawingBuffer: false,
      powerPreference: "high-performance" })];
  };
  // in software (no GPU) every multisampled pixel is computed four times over; a GPU antialiases for free
  let [canvas, gl] = context(false);
  if (!gl) return null;
  const debug = gl.getExtension("WEBGL_debug_renderer_info");
  const rendererName = String(gl.getParameter(debug ? debug.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
  const software = /swiftshader|llvmpipe|softpipe|software/i.test(rendererName);
  if (!software) {
    const [c, g] = context(true);
    if (g) {
      const lose = gl.getExtension("WEBGL_lose_context");
      if (lose) lose.loseContext();
      [canvas, gl] = [c, g];
    }
  }
  container.textContent = "";
  container.style.position = "relative";
  container.append(canvas);

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
  const loc = { pos: gl.getAttribLocation(program, "a_pos"), mvp: gl.getUniformLocation(program, "u_mvp"),
    offset: gl.getUniformLocation(program, "u_offset"), size: gl.getUniformLocation(program, "u_size"),
    color: gl.getUniformLocation(program, "u_color") };
  gl.enableVertexAttribArray(loc.pos);

  const traces = new Map(); // uid -> {trace, parts: [{mode, buffer, count, color, alpha, width|size, point}]}
  const camera = { eye: [...eye], up: [...up], zoom: 1 };
  // plotly's scene puts the axes' ranges on a box of half side aspect / 2, seen from `eye`
  const scale = [aspect[0] / (2 * box[0]), aspect[1] / (2 * box[1]), aspect[2] / (2 * box[2])];
  let mvp = null, pending = 0, width = 0, height = 0, dpr = 1;
  const clickHandlers = [];

  function resize() {
    dpr = Math.max(1, Math.min(2, window.devicePixelRatio || 1));
    width = Math.max(1, container.clientWidth); height = Math.max(1, container.clientHeight);
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
  }

  function matrix() {
    const eyeAt = camera.eye.map((v) => v * camera.zoom);
    const dist = Math.hypot(...eyeAt);
    const model = new Float32Array([scale[0], 0, 0, 0, 0, scale[1], 0, 0, 0, 0, scale[2], 0, 0, 0, 0, 1]);
    return multiply(perspective(FOVY, width / height, dist / 50, dist * 4), multiply(lookAt(eyeAt, camera.up), model));
  }

  function upload(uid, trace) {
    const old = traces.get(uid);
    if (old) for (const p of old.parts) gl.deleteBuffer(p.buffer);
    const c = convert(trace), parts = c.mode === "group" ? c.parts : [c];
    for (const p of parts) {
      p.buffer = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, p.buffer);
      gl.bufferData(gl.ARRAY_BUFFER, p.pos, gl.STATIC_DRAW);
      p.count = p.pos.length / 3;
      p.positions = p.pos; // kept for picking
      delete p.pos;
    }
    traces.set(uid, { trace, parts, overlay: view.overlay(uid) });
  }

  const OFFSETS = { 1: [[0, 0]], 2: [[0, 0], [1, 0], [0, 1]], 3: [[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]] };

  function drawPart(p) {
    gl.bindBuffer(gl.ARRAY_BUFFER, p.buffer);
    gl.vertexAttribPointer(loc.pos, 3, gl.FLOAT, false, 0, 0);
    gl.uniform4f(loc.color, p.color[0], p.color[1], p.color[2], p.alpha);
    if (p.mode === "points") {
      gl.uniform1f(loc.size, p.size * dpr * 1.5);
      gl.uniform2f(loc.offset, 0, 0);
      gl.drawArrays(gl.POINTS, 0, p.count);
      return;
    }
    gl.uniform1f(loc.size, 1);
    const offsets = p.mode === "lines" ? OFFSETS[Math.max(1, Math.min(3, Math.round(p.width / 2)))] : OFFSETS[1];
    for (const [dx, dy] of offsets) {
      gl.uniform2f(loc.offset, (2 * dx) / canvas.width, (2 * dy) / canvas.height);
      gl.drawArrays(p.mode === "lines" ? gl.LINES : gl.TRIANGLES, 0, p.count);
    }
  }

  function render() {
    pending = 0;
    if (canvas.width !== Math.round(container.clientWidth * dpr) || !width) resize();
    gl.viewport(0, 0, canvas.width, canvas.height);
    const bg = rgb(view.background);
    gl.clearColor(bg[0], bg[1], bg[2], 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    mvp = matrix();
    gl.uniformMatrix4fv(loc.mvp, false, mvp);
    const shown = [...traces.values()].filter((t) => t.trace.visible !== false);
    // opaque lines and points with depth; then semi-transparent surfaces, blended, writing no depth;
    // then the highlight and selection over everything, so that they are never hidden
    gl.enable(gl.DEPTH_TEST); gl.depthMask(true); gl.disable(gl.BLEND);
    for (const t of shown) if (!t.overlay) for (const p of t.parts) if (p.mode !== "triangles") drawPart(p);
    gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA); gl.depthMask(false);
    for (const t of shown) if (!t.overlay) for (const p of t.parts) if (p.mode === "triangles") drawPart(p);
    gl.disable(gl.DEPTH_TEST);
    for (const t of shown) if (t.overlay) for (const p of t.parts) drawPart(p);
    gl.depthMask(true);
  }

  function schedule() { if (!pending) pending = requestAnimationFrame(render); }

  /** The nearest drawn vertex of a pickable trace within `radius` CSS pixels of (px, py): {uid, point}. */
  function pick(px, py, pickable, radius = 8) {
    if (!mvp) return null;
    let best = null, bestD = radius * radius;
    for (const [uid, t] of traces) {
      if (t.trace.visible === false || !pickable(uid)) continue;
      for (const p of t.parts) {
        if (!p.point) continue;
        const v = p.positions, m = mvp;
        for (let i = 0, n = p.count; i < n; i++) {
          const x = v[3 * i], y = v[3 * i + 1], z = v[3 * i + 2];
          const w = m[3] * x + m[7] * y + m[11] * z + m[15];
          if (w <= 0) continue;
          const sx = ((m[0] * x + m[4] * y + m[8] * z + m[12]) / w + 1) * 0.5 * width;
          const sy = (1 - (m[1] * x + m[5] * y + m[9] * z + m[13]) / w) * 0.5 * height;
          const d = (sx - px) ** 2 + (sy - py) ** 2;
          if (d < bestD) { bestD = d; best = { uid, point: p.point[i] }; }
        }
      }
    }
    return best;
  }

  // turntable: drag turns the camera around the beam's vertical axis and tilts it; the wheel zooms
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, moved: false };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true; drag.x = e.clientX; drag.y = e.clientY;
    const [x, y, z] = camera.eye, r = Math.hypot(x, y, z);
    // spherical angles about the up axis (y): azimuth in the x-z plane, elevation towards y
    let az = Math.atan2(x, z), el = Math.asin(Math.max(-1, Math.min(1, y / r)));
    az -= dx * 0.008; el = Math.max(-1.5, Math.min(1.5, el + dy * 0.008));
    camera.eye = [r * Math.cos(el) * Math.sin(az), r * Math.sin(el), r * Math.cos(el) * Math.cos(az)];
    schedule();
  });
  canvas.addEventListener("pointerup", (e) => {
    const was = drag;
    drag = null;
    if (!was || was.moved) return;
    const box = canvas.getBoundingClientRect();
    for (const f of clickHandlers) f(e.clientX - box.left, e.clientY - box.top);
  });
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    camera.zoom = Math.max(0.2, Math.min(5, camera.zoom * Math.exp(e.deltaY * 0.001)));
    schedule();
  }, { passive: false });
  new ResizeObserver(() => { resize(); schedule(); }).observe(container);

  const view = {
    canvas,
    background: "#000000",
    /** Whether a trace is drawn over everything (a highlight), not hidden behind what is in front. */
    overlay: () => false,
    /** The WebGL renderer's name, and whether it runs in software. */
    renderer: rendererName,
    software,
    /** Replace every trace: the uid of each is kept for set() and visibility. */
    react(list) {
      for (const t of traces.values()) for (const p of t.parts) gl.deleteBuffer(p.buffer);
      traces.clear();
      for (const t of list) upload(t.uid, t);
      render();
    },
    /** Replace the points of one trace (x, y, z) and draw again. */
    restyle(uid, patch) {
      const t = traces.get(uid);
      if (!t) return;
      upload(uid, { ...t.trace, ...patch });
      schedule();
    },
    visible(uid, on) {
      const t = traces.get(uid);
      if (t) { t.trace.visible = on; schedule(); }
    },
    render,
    pick,
    onClick(f) { clickHandlers.push(f); },
    /** CSS-pixel position of a data point inside the view (for scripts and tests). */
    project(x, y, z) {
      const m = mvp, w = m[3] * x + m[7] * y + m[11] * z + m[15];
      return [((m[0] * x + m[4] * y + m[8] * z + m[12]) / w + 1) * 0.5 * width,
        (1 - (m[1] * x + m[5] * y + m[9] * z + m[13]) / w) * 0.5 * height];
    },
    clear() {
      for (const t of traces.values()) for (const p of t.parts) gl.deleteBuffer(p.buffer);
      traces.clear();
      render();
    },
  };
  resize();
  return view;
}

// The giod event display: one event in 3-D and in r-phi and r-z projections.
//
// The three views are drawn by webgl3d.js (plain WebGL): the 3-D view first, then the r-phi and r-z
// projections. Where webgl3d.js is missing, WebGL is not there or ?renderer=plotly asks for it, plotly.js
// draws them all instead (loaded only then).
// The scene comes from GET /api/v1/events/{dataset}/{entry} (format "giod-scene/1", see
// giod.display.scene): detector geometry in cm and, per role (hits, tracks, cells, clusters, jets,
// muons, electrons, photons, taus), every field as a column and every relation as index lists.
// The geometry of towers, helices, cones and arrows is built here in typed arrays.
//
// window.giodDisplay exposes the page's state (ready, error, layers, selected, highlight, renderer,
// timings) and a few actions (load, select, setLayer) for scripts and tests.

import { answer, api, explain, el, formatNumber, showMessage, token, tokenBox } from "./common.js";

const COLORS = {
  background: "#111318",
  grid: "#232833",
  axis: "#8a93a3",
  tracker: "#8fa3bf",
  trackerRings: "#3d4552", // the tracker's colour at 35% over the background
  ecalGeo: "#2e8b57",
  hcalGeo: "#4169e1",
  solenoid: "#9a9a9a",
  hits: "#ffd700",
  tracks: "#ff5a5a",
  ecal: "#3ddc5a",
  hcal: "#3d8bff",
  clusters: "#d0d0d0",
  jets: "#ffa500",
  muons: "#ff2a6d",
  electrons: "#05d9e8",
  photons: "#fff275",
  taus: "#ff9de2",
  met: "#c77dff",
  highlight: "#ff00ff",
  selected: "#ffffff",
};

const LAYERS = [
  { key: "detector", label: "detector", color: COLORS.tracker },
  { key: "hits", label: "tracker hits", role: "hits", color: COLORS.hits },
  { key: "tracks", label: "tracks", role: "tracks", color: COLORS.tracks },
  { key: "ecal", label: "ECAL cells", role: "cells", color: COLORS.ecal },
  { key: "hcal", label: "HCAL cells", role: "cells", color: COLORS.hcal },
  { key: "clusters", label: "clusters", role: "clusters", color: COLORS.clusters },
  { key: "jets", label: "jets", role: "jets", color: COLORS.jets },
  { key: "muons", label: "muons", role: "muons", color: COLORS.muons },
  { key: "electrons", label: "electrons", role: "electrons", color: COLORS.electrons },
  { key: "photons", label: "photons", role: "photons", color: COLORS.photons },
  { key: "taus", label: "taus", role: "taus", color: COLORS.taus },
  { key: "met", label: "missing E_T", color: COLORS.met },
];
const LEPTONS = ["muons", "electrons", "photons", "taus"];
const VIEW_R = 450; // cm: the 3-D view's box, the calorimeters and a little beyond
const VIEW_Z = 650;
const VIEWS = ["view3d", "viewRphi", "viewRz"];
// every cell in the 3-D view costs plotly a line segment to convert and draw: by default a busy event
// shows its most energetic cells down to the energy of the MAX_3D_CELLS-th (the projections sum them all);
// the WebGL view draws a segment for a few bytes of buffer, so it shows many more
const MAX_3D_CELLS = 12000;
const MAX_3D_CELLS_WEBGL = 100000;

const S = {
  ready: false, // an event is drawn
  loading: false,
  error: null, // {status, kind, message} of the last failed load
  dataset: null,
  entry: null,
  scene: null,
  layers: Object.fromEntries(LAYERS.map((l) => [l.key, true])),
  selected: null, // {role, index}
  highlight: { hits: [], tracks: [], cells: [], clusters: [], jets: [] },
  counts: {}, // objects drawn per layer
  timings: {},
  loads: 0,
  prefetching: Promise.resolve(null), // the entry a step goes to, once its scene is here (null: none)
  towerScale: null, // cm per GeV
  minCellEnergy: 0, // GeV: cells below are left out of the 3-D view
  minCellEnergyAsked: null, // from the page's control or ?min_cell_energy=
};
window.giodDisplay = S;

const $ = (id) => document.getElementById(id);
let info = new Map(); // trace uid -> {layer, role, map, indices, points, index}

/** The WebGL renderer, and whether it runs in software (no GPU: SwiftShader, llvmpipe). */
function glRenderer() {
  try {
    const gl = document.createElement("canvas").getContext("webgl");
    if (!gl) return { name: "none", software: false };
    const ext = gl.getExtension("WEBGL_debug_renderer_info");
    const name = String(gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
    const lose = gl.getExtension("WEBGL_lose_context");
    if (lose) lose.loseContext();
    return { name, software: /swiftshader|llvmpipe|softpipe|software/i.test(name) };
  } catch {
    return { name: "unknown", software: false };
  }
}

const PARAMS = new URLSearchParams(location.search);

// The 3-D view is drawn by the small WebGL renderer next to this file (webgl3d.js) unless it is
// missing or refused (?renderer=plotly): then plotly.js draws it, as it draws the projections.
const fastModule = PARAMS.get("renderer") === "plotly"
  ? Promise.resolve({ reason: "?renderer=plotly asks for it" })
  : import("./webgl3d.js").then((m) => ({ module: m }),
    (err) => ({ reason: `the page could not load /static/webgl3d.js (${err.message})` }));

// The projections' ranges, axes and titles, for both renderers.
const PROJECTIONS = {
  viewRphi: { proj: "rphi", x: [-320, 320], y: [-320, 320], xTitle: "x (cm)", yTitle: "y (cm)", title: "r-φ" },
  viewRz: { proj: "rz", x: [-620, 620], y: [-320, 320], xTitle: "z (cm)", yTitle: "±r (cm)", title: "r-z" },
};

let fastView = null; // the WebGL 3-D view once created; undefined after a failure
const fastViews = {}; // view id -> its WebGL view (the 3-D view and both projections)
/** The WebGL view drawing `view`, or null where plotly.js draws it. */
function fastOf(view) { return fastViews[view] || null; }

/** A WebGL view's colours, highlight order and clicks, as the page's. */
function fastClicks(fast) {
  fast.background = COLORS.background;
  fast.overlay = (uid) => (info.get(uid) || {}).layer === "highlight";
  const pickable = (uid) => !!(info.get(uid) || {}).role;
  fast.onClick((x, y) => {
    const hit = fast.pick(x, y, pickable);
    if (hit) onPlotClick({ points: [{ data: { uid: hit.uid }, pointNumber: hit.point }] });
  });
  // what the pointer is over, as plotly's hover label says it: the object's name, and a hand
  fast.onHover((x, y) => {
    const hit = fast.pick(x, y, pickable), what = hit ? objectOf(hit.uid, hit.point) : null;
    fast.canvas.style.cursor = what ? "pointer" : "grab";
    fast.canvas.title = !what ? "" : what.role === "met" ? "missing E_T" : objectLabel(what.role, what.index);
  });
}

/** The fast 3-D view, or null (plotly draws every view); says once in the page why it is not there.
 * The projections' WebGL views start with it. */
async function view3dFast() {
  if (fastView) return fastView;
  if (fastView === undefined) return null;
  const got = await fastModule;
  let reason = got.reason;
  if (got.module) {
    try {
      fastView = got.module.createView($("view3d"), { box: [VIEW_R, VIEW_R, VIEW_Z], aspect: [1, 1, VIEW_Z / VIEW_R],
        eye: [1.25, -1.05, 0.55], up: [0, 1, 0] });
      if (!fastView) reason = "this browser gives the page no WebGL context";
    } catch (err) {
      fastView = null;
      reason = `the WebGL view failed to start (${err.message})`;
    }
  }
  if (fastView) {
    S.gl = { name: fastView.renderer, software: fastView.software };
    fastViews.view3d = fastView;
    fastClicks(fastView);
    $("view3d").append(el("div", { class: "view-title" }, "3-D"));
    for (const [view, p] of Object.entries(PROJECTIONS)) {
      let fast = null;
      try {
        fast = got.module.createView2d($(view), { x: p.x, y: p.y, xTitle: p.xTitle, yTitle: p.yTitle,
          grid: COLORS.grid, axis: COLORS.axis });
      } catch (err) {
        fast = null; // plotly.js draws this projection
      }
      if (!fast) continue;
      fastViews[view] = fast;
      fastClicks(fast);
      $(view).append(el("div", { class: "view-title" }, p.title));
    }
    S.renderer = "webgl";
    return fastView;
  }
  fastView = undefined;
  S.renderer = "plotly";
  const note = $("renderer-note");
  note.hidden = false;
  note.textContent = `Views drawn with plotly.js, which is slower to start: ${reason}.`;
  return null;
}

let plotlyLoading = null;
/** plotly.js from the installed plotly Python package, loaded on first use: after the first 3-D frame when
 * the WebGL view draws it, at once otherwise. */
function loadPlotly() {
  if (plotlyLoading) return plotlyLoading;
  S.gl = S.gl || glRenderer();
  if (S.gl.software && PARAMS.get("antialias") !== "1") {
    // in software every multisampled pixel is computed four times over: a busy view draws in less
    // than half the time without it (plotly asks for antialiasing and has no option to turn it off)
    const getContext = HTMLCanvasElement.prototype.getContext;
    HTMLCanvasElement.prototype.getContext = function (kind, options) {
      if (typeof kind === "string" && kind.includes("webgl")) options = { ...options, antialias: false };
      return getContext.call(this, kind, options);
    };
  }
  plotlyLoading = new Promise((resolve, reject) => {
    const done = () => { S.plotlyReadyMs = performance.now(); resolve(window.Plotly); };
    const script = document.createElement("script");
    script.src = "/vendor/plotly.min.js";
    script.async = true;
    script.addEventListener("load", done);
    script.addEventListener("error", () => reject(new Error("plotly.js could not be loaded from " +
      "/vendor/plotly.min.js (the server needs the 'plotly' Python package)")));
    document.head.append(script);
  });
  plotlyLoading.catch((err) => { S.error = { status: 0, kind: "plotly", message: err.message }; showMessage(err.message); });
  return plotlyLoading;
}

// ------------------------------------------------------------------ scene access

function related(rel, k) {
  if (!rel) return [];
  if (rel.offsets) return rel.indices.slice(rel.offsets[k], rel.offsets[k + 1]);
  const i = rel.indices[k];
  return i >= 0 ? [i] : [];
}

function objectsOf(role) {
  return S.scene && S.scene.objects[role] ? S.scene.objects[role] : null;
}

/** The objects that point to (role, k) through a relation: a hit's track, a track's jets. */
function pointingTo(role, k) {
  const out = [];
  for (const [r, obj] of Object.entries(S.scene.objects)) {
    for (const rel of Object.values(obj.relations)) {
      if (rel.role !== role) continue;
      if (rel.offsets) {
        for (let a = 0; a < obj.n; a++) {
          for (let p = rel.offsets[a]; p < rel.offsets[a + 1]; p++) if (rel.indices[p] === k) { out.push([r, a]); break; }
        }
      } else {
        rel.indices.forEach((i, a) => { if (i === k) out.push([r, a]); });
      }
    }
  }
  return out;
}

/** What lights up when (role, k) is selected: its related objects and, one level on, theirs. */
function highlightOf(role, k) {
  const sets = { hits: new Set(), tracks: new Set(), cells: new Set(), clusters: new Set(), jets: new Set() };
  const add = (r, i) => { if (sets[r]) sets[r].add(i); };
  const obj = objectsOf(role);
  for (const rel of Object.values(obj.relations)) if (rel.role) related(rel, k).forEach((i) => add(rel.role, i));
  for (const [r, i] of pointingTo(role, k)) add(r, i);
  // one level on: a jet's tracks bring their hits, its clusters their cells
  for (const [via, target] of [["tracks", "hits"], ["clusters", "cells"]]) {
    const o = objectsOf(via);
    if (!o || role === target) continue;
    for (const rel of Object.values(o.relations)) {
      if (rel.role !== target) continue;
      for (const t of sets[via]) related(rel, t).forEach((i) => sets[target].add(i));
    }
  }
  if (sets[role]) sets[role].delete(k);
  return Object.fromEntries(Object.entries(sets).map(([r, s]) => [r, [...s].sort((a, b) => a - b)]));
}

// ------------------------------------------------------------------ geometry

function cylinders(list, nseg = 48) {
  const x = [], y = [], z = [], i = [], j = [], k = [];
  for (const c of list) {
    const base = x.length;
    for (let s = 0; s < nseg; s++) {
      const p = (2 * Math.PI * s) / nseg;
      x.push(c.r * Math.cos(p), c.r * Math.cos(p)); y.push(c.r * Math.sin(p), c.r * Math.sin(p)); z.push(c.z0, c.z1);
    }
    for (let s = 0; s < nseg; s++) {
      const a = base + 2 * s, b = base + 2 * ((s + 1) % nseg);
      i.push(a, a + 1); j.push(b, b); k.push(a + 1, b + 1);
    }
  }
  return { x, y, z, i, j, k };
}

function annuli(list, nseg = 48) {
  const x = [], y = [], z = [], i = [], j = [], k = [];
  for (const d of list) {
    const base = x.length;
    for (let s = 0; s < nseg; s++) {
      const p = (2 * Math.PI * s) / nseg;
      x.push(d.r0 * Math.cos(p), d.r1 * Math.cos(p)); y.push(d.r0 * Math.sin(p), d.r1 * Math.sin(p)); z.push(d.z, d.z);
    }
    for (let s = 0; s < nseg; s++) {
      const a = base + 2 * s, b = base + 2 * ((s + 1) % nseg);
      i.push(a, a + 1); j.push(b, b); k.push(a + 1, b + 1);
    }
  }
  return { x, y, z, i, j, k };
}

const CONE_SEGMENTS = 24;
const CONE_VERTICES = CONE_SEGMENTS + 2; // apex, rim, centre of the base

function coneGeometry(eta, phi, length, halfAngle, nseg = CONE_SEGMENTS) {
  const theta = 2 * Math.atan(Math.exp(-eta));
  const axis = [Math.sin(theta) * Math.cos(phi), Math.sin(theta) * Math.sin(phi), Math.cos(theta)];
  // two unit vectors across the axis
  const u = [-Math.sin(phi), Math.cos(phi), 0];
  const w = [axis[1] * u[2] - axis[2] * u[1], axis[2] * u[0] - axis[0] * u[2], axis[0] * u[1] - axis[1] * u[0]];
  const radius = length * Math.tan(halfAngle);
  const x = [0], y = [0], z = [0], i = [], j = [], k = [];
  for (let s = 0; s < nseg; s++) {
    const a = (2 * Math.PI * s) / nseg, ca = Math.cos(a) * radius, sa = Math.sin(a) * radius;
    x.push(axis[0] * length + u[0] * ca + w[0] * sa);
    y.push(axis[1] * length + u[1] * ca + w[1] * sa);
    z.push(axis[2] * length + u[2] * ca + w[2] * sa);
  }
  x.push(axis[0] * length); y.push(axis[1] * length); z.push(axis[2] * length);
  const centre = nseg + 1;
  for (let s = 0; s < nseg; s++) {
    const a = 1 + s, b = 1 + ((s + 1) % nseg);
    i.push(0, centre); j.push(a, b); k.push(b, a);
  }
  return { x, y, z, i, j, k, tip: [axis[0] * length, axis[1] * length, axis[2] * length] };
}

function jetLength(pt) { return Math.max(60, Math.min(420, 60 + 2.5 * pt)); }

function leptonReach(role) {
  return { muons: [420, 620], electrons: [129, 315.4], photons: [129, 315.4], taus: [181.1, 388] }[role];
}

function direction(eta, phi) {
  const theta = 2 * Math.atan(Math.exp(-eta));
  return [Math.sin(theta) * Math.cos(phi), Math.sin(theta) * Math.sin(phi), Math.cos(theta), Math.sin(theta)];
}

function reachAlong(d, rmax, zmax) {
  const a = d[3] > 1e-9 ? rmax / d[3] : Infinity, b = Math.abs(d[2]) > 1e-9 ? zmax / Math.abs(d[2]) : Infinity;
  return Math.min(a, b);
}

function metLength(met) { return Math.max(80, Math.min(450, 80 + 4 * met)); }

/** The 3-D view's cell threshold for a busy event: the energy of its MAX_3D_CELLS(_WEBGL)-th cell. */
function defaultCellThreshold(scene) {
  const cells = scene.objects.cells;
  const most = S.renderer === "webgl" ? MAX_3D_CELLS_WEBGL : MAX_3D_CELLS;
  if (!cells || cells.n <= most) return 0;
  const e = Float64Array.from(cells.fields.energy).sort().reverse();
  return Math.ceil(e[most - 1] * 1000) / 1000;
}

// What follows from a scene alone (cells per calorimeter, cell axes, summed towers, helix samples) is
// kept on the scene's objects: computed once, when the scene is fetched ahead (prepare) or first drawn.

/** Cells of one calorimeter ("ecal": codes 1, 2; "hcal": 3, 4). */
function cellsOf(calo, scene = S.scene) {
  const cells = scene.objects.cells;
  if (!cells) return [];
  cells._of = cells._of || {};
  if (cells._of[calo]) return cells._of[calo];
  const det = scene.detector, out = [], sub = cells.fields.subdetector;
  for (let c = 0; c < cells.n; c++) {
    const g = det.cells[sub[c]];
    if (g && g.calo === calo) out.push(c);
  }
  return (cells._of[calo] = out);
}

/** Per cell, 7 numbers: front-face centre (x, y, z), unit outward direction, cylindrical radius. */
function cellAxes(scene = S.scene) {
  const cells = scene.objects.cells;
  if (cells._axes) return cells._axes;
  const f = cells.fields, det = scene.detector.cells, out = new Float64Array(7 * cells.n);
  for (let c = 0, o = 0; c < cells.n; c++, o += 7) {
    const g = det[f.subdetector[c]], eta = f.eta[c], phi = f.phi[c];
    if (!g) continue;
    let r, zz;
    if (g.part === "barrel") { r = g.r; zz = g.r * Math.sinh(eta); } else { zz = Math.sign(eta) * g.z; r = g.z / Math.abs(Math.sinh(eta)); }
    const x = r * Math.cos(phi), y = r * Math.sin(phi), n = Math.hypot(x, y, zz);
    out[o] = x; out[o + 1] = y; out[o + 2] = zz; out[o + 3] = x / n; out[o + 4] = y / n; out[o + 5] = zz / n; out[o + 6] = r;
  }
  return (cells._axes = out);
}

/** Fetched ahead, a scene's geometry is worked out while the physicist looks at the event before:
 * with the WebGL views, its traces too, in their vertex arrays, built as draw() would build them now. */
function prepare(scene) {
  geometry(scene);
  if (!VIEWS.every(fastOf)) return;
  const saved = [S.scene, S.minCellEnergy, info];
  try {
    S.scene = scene;
    S.minCellEnergy = S.minCellEnergyAsked ?? defaultCellThreshold(scene);
    info = new Map();
    const built = { view3d: build3d(scene), viewRphi: build2d(scene, "rphi"), viewRz: build2d(scene, "rz") };
    for (const view of VIEWS) fastOf(view).prepare(built[view].traces);
    scene._ahead = { built, info, minCellEnergy: S.minCellEnergy };
  } finally {
    [S.scene, S.minCellEnergy, info] = saved;
  }
}

/** A scene's helix samples, cell axes, cells per calorimeter and summed towers, kept on it. */
function geometry(scene) {
  const o = scene.objects;
  if (o.tracks && o.tracks.path) {
    const tracks = o.tracks;
    tracks._samples = tracks._samples || [];
    for (let t = 0; t < tracks.n; t++) if (!tracks._samples[t]) tracks._samples[t] = helixSamples(tracks, t);
  }
  if (o.cells) {
    cellAxes(scene);
    for (const calo of ["ecal", "hcal"]) {
      cellsOf(calo, scene);
      for (const proj of ["rphi", "rz"]) projectedTowers(calo, proj, scene);
    }
  }
}

// ------------------------------------------------------------------ traces

function uidFor(view, name) { return `${view}_${name}`; } // plotly puts uids in CSS selectors

function register(view, name, meta, trace) {
  trace.uid = uidFor(view, name);
  info.set(trace.uid, meta);
  return trace;
}

/** Which of a track's helix points to draw: enough that no segment turns more than ~0.1 rad. */
function helixSamples(tracks, t) {
  const P = tracks.path.points, px = tracks.path.x, py = tracks.path.y;
  let turn = 0, prev = null;
  for (let p = 1; p < P; p++) {
    const q = t * P + p, a = Math.atan2(py[q] - py[q - 1], px[q] - px[q - 1]);
    if (prev !== null) { let d = Math.abs(a - prev); if (d > Math.PI) d = 2 * Math.PI - d; turn += d; }
    prev = a;
  }
  const n = Math.max(3, Math.min(P, Math.ceil(turn / 0.1) + 2));
  return Array.from({ length: n }, (_, k) => Math.round((k * (P - 1)) / (n - 1)));
}

function helixArrays(tracks, which, proj) {
  // proj: "3d" → x, y, z; "rphi" → x, y; "rz" → z, signed r; owner[k]: the track of point k
  if (!tracks._samples) tracks._samples = [];
  const P = tracks.path.points, px = tracks.path.x, py = tracks.path.y, pz = tracks.path.z;
  const a = [], b = [], c = proj === "3d" ? [] : null, owner = [];
  for (const t of which) {
    const samples = tracks._samples[t] || (tracks._samples[t] = helixSamples(tracks, t));
    const sign = Math.sin(tracks.fields.phi[t]) >= 0 ? 1 : -1;
    for (const p of samples) {
      const q = t * P + p;
      if (proj === "rz") { a.push(pz[q]); b.push(sign * Math.hypot(px[q], py[q])); }
      else { a.push(px[q]); b.push(py[q]); if (c) c.push(pz[q]); }
      owner.push(t);
    }
    a.push(null); b.push(null); if (c) c.push(null); owner.push(t);
  }
  return c ? [a, b, c, owner] : [a, b, owner];
}

/** Cells as towers in 3-D: a segment from the front face's centre outwards, its length proportional
 * to the energy (a segment is 2 points to plotly, a box 8 vertices and 12 triangles). */
function towerSegments(which, scale) {
  const n = which.length, x = new Array(3 * n), y = new Array(3 * n), z = new Array(3 * n);
  const e = objectsOf("cells").fields.energy, ax = cellAxes();
  for (let a = 0, o = 0; a < n; a++, o += 3) {
    const c = which[a], k = 7 * c;
    const fx = ax[k], fy = ax[k + 1], fz = ax[k + 2], ux = ax[k + 3], uy = ax[k + 4], uz = ax[k + 5];
    const len = Math.max(1, Math.min(200, e[c] * scale));
    x[o] = fx; y[o] = fy; z[o] = fz;
    x[o + 1] = fx + ux * len; y[o + 1] = fy + uy * len; z[o + 1] = fz + uz * len;
    x[o + 2] = null; y[o + 2] = null; z[o + 2] = null;
  }
  return [x, y, z];
}

function cellSegments(which, proj, scale) {
  const a = new Array(3 * which.length), b = new Array(3 * which.length);
  const f = objectsOf("cells").fields, ax = cellAxes();
  let o = 0;
  for (const c of which) {
    const [x, y, zz, ux, uy, uz, r] = ax.subarray(7 * c, 7 * c + 7);
    const len = Math.max(1, Math.min(200, f.energy[c] * scale));
    if (proj === "rphi") {
      const rr = Math.hypot(x, y);
      a[o] = x; b[o] = y; a[o + 1] = x + (x / rr) * len * Math.hypot(ux, uy); b[o + 1] = y + (y / rr) * len * Math.hypot(ux, uy);
    } else {
      const sign = y >= 0 ? 1 : -1;
      a[o] = zz; b[o] = sign * r; a[o + 1] = zz + uz * len; b[o + 1] = sign * (r + Math.hypot(ux, uy) * len);
    }
    a[o + 2] = null; b[o + 2] = null; o += 3;
  }
  return [a, b];
}

/** Cell energies summed into projective towers: per phi sector of the barrel (r-phi), per ring and
 * half (r-z, upper half phi in [0, pi)). Each tower: its front-face corners and outward directions. */
function projectedTowers(calo, proj, scene = S.scene) {
  const cells = scene.objects.cells, det = scene.detector, f = cells.fields;
  cells._towers = cells._towers || {};
  if (cells._towers[calo + proj]) return cells._towers[calo + proj];
  const bins = new Map();
  for (let c = 0; c < cells.n; c++) {
    const g = det.cells[f.subdetector[c]];
    if (!g || g.calo !== calo || (proj === "rphi" && g.part !== "barrel")) continue;
    const phi = f.phi[c], eta = f.eta[c], part = g.part === "barrel" ? 0 : 1;
    // numbers, not strings, as keys: a busy event has 50,000 cells to bin in each projection
    let key;
    if (proj === "rphi") key = part * 1e6 + Math.floor((((phi % (2 * Math.PI)) + 2 * Math.PI) % (2 * Math.PI)) / g.dphi);
    else key = (part * 1e6 + (f.ieta ? f.ieta[c] : Math.floor(eta / g.deta)) + 5e5) * 2 + (Math.sin(phi) >= 0 ? 1 : 0);
    let b = bins.get(key);
    if (!b) { b = { g, sum: 0, eta, phi, sign: Math.sin(phi) >= 0 ? 1 : -1 }; bins.set(key, b); }
    b.sum += Math.max(0, f.energy[c]);
  }
  const list = [...bins.values()];
  return (cells._towers[calo + proj] = { list, sums: list.map((b) => b.sum), proj });
}

function towerPolygons(towers, cmPerGeV) {
  const x = [], y = [];
  for (const b of towers.list) {
    const len = Math.max(0.5, b.sum * cmPerGeV), g = b.g;
    let corners; // two front-face points in the projection plane
    if (towers.proj === "rphi") {
      const p0 = Math.floor((((b.phi % (2 * Math.PI)) + 2 * Math.PI) % (2 * Math.PI)) / g.dphi) * g.dphi, p1 = p0 + g.dphi;
      corners = [[g.r * Math.cos(p0), g.r * Math.sin(p0)], [g.r * Math.cos(p1), g.r * Math.sin(p1)]];
    } else {
      const e0 = b.eta - g.deta / 2, e1 = b.eta + g.deta / 2;
      const at = (e) => (g.part === "barrel" ? [g.r * Math.sinh(e), b.sign * g.r]
        : [Math.sign(b.eta) * g.z, b.sign * g.z / Math.abs(Math.sinh(e))]);
      corners = [at(e0), at(e1)];
    }
    const out = corners.map(([u, v]) => { const n = Math.hypot(u, v); return [u + (u / n) * len, v + (v / n) * len]; });
    x.push(corners[0][0], corners[1][0], out[1][0], out[0][0], corners[0][0], null);
    y.push(corners[0][1], corners[1][1], out[1][1], out[0][1], corners[0][1], null);
  }
  return [x, y];
}

function scale() {
  if (S.towerScale) return S.towerScale;
  const max = S.scene.stats.cell_energy_max || 1;
  return 80 / Math.max(max, 1);
}

function detectorTraces3d(det) {
  // the tracker as wire rings (its 14 nested cylinders as surfaces would cost the software renderer
  // a full-screen blend each); the calorimeters as semi-transparent front surfaces
  const t = det.tracker, out = [], x = [], y = [], z = [];
  const ring = (r, zz, n = 64) => {
    for (let s = 0; s <= n; s++) { const p = (2 * Math.PI * s) / n; x.push(r * Math.cos(p)); y.push(r * Math.sin(p)); z.push(zz); }
    x.push(null); y.push(null); z.push(null);
  };
  for (const l of t.barrel) {
    ring(l.r, -l.half_length); ring(l.r, l.half_length);
    for (let s = 0; s < 8; s++) {
      const p = (2 * Math.PI * s) / 8;
      x.push(l.r * Math.cos(p), l.r * Math.cos(p), null); y.push(l.r * Math.sin(p), l.r * Math.sin(p), null);
      z.push(-l.half_length, l.half_length, null);
    }
  }
  for (const d of t.endcap) for (const zz of [d.z, -d.z]) { ring(d.r_min, zz); ring(d.r_max, zz); }
  // opaque, in the colour the rings had at 35% over the background: nothing semi-transparent in the first frame
  out.push(register("view3d", "tracker", { layer: "detector" }, { type: "scatter3d", mode: "lines", x, y, z,
    line: { width: 1, color: COLORS.trackerRings }, hoverinfo: "skip", name: "tracker" }));
  const common = { type: "mesh3d", hoverinfo: "skip", flatshading: true, showscale: false,
    lighting: { ambient: 0.9, diffuse: 0.2, specular: 0, fresnel: 0 } };
  for (const c of det.calorimeters) {
    const color = c.calo === "ecal" ? COLORS.ecalGeo : COLORS.hcalGeo;
    const g = c.part === "barrel"
      ? cylinders([{ r: c.r_min, z0: -c.z_max, z1: c.z_max }], 64)
      : annuli([{ z: c.z_min, r0: c.r_min, r1: c.r_max }, { z: -c.z_min, r0: c.r_min, r1: c.r_max }], 64);
    out.push(register("view3d", `calo-${c.code}`, { layer: "detector", late: true }, { ...common, ...g, color,
      opacity: c.calo === "ecal" ? 0.1 : 0.07, name: c.name }));
  }
  return out;
}

function build3d(scene) {
  const det = scene.detector, o = scene.objects, traces = detectorTraces3d(det);
  const hits = o.hits;
  if (hits) {
    traces.push(register("view3d", "hits", { layer: "hits", role: "hits", map: "point" }, {
      type: "scatter3d", mode: "markers", x: hits.fields.x, y: hits.fields.y, z: hits.fields.z,
      // squares: gl-scatter3d draws every marker as its glyph's triangles, and a circle has dozens
      marker: { size: 2, color: COLORS.hits, symbol: "square" }, name: "tracker hits", hoverinfo: "name" }));
  }
  const tracks = o.tracks;
  if (tracks) {
    const [x, y, z, owner] = helixArrays(tracks, [...Array(tracks.n).keys()], "3d");
    traces.push(register("view3d", "tracks", { layer: "tracks", role: "tracks", map: "point", indices: owner }, {
      type: "scatter3d", mode: "lines", x, y, z, line: { width: 3, color: COLORS.tracks }, name: "tracks",
      hoverinfo: "name" }));
  }
  if (o.cells) {
    const e = o.cells.fields.energy;
    for (const calo of ["ecal", "hcal"]) {
      const which = cellsOf(calo).filter((c) => e[c] >= S.minCellEnergy);
      const [x, y, z] = towerSegments(which, scale());
      traces.push(register("view3d", `cells-${calo}`, { layer: calo, role: "cells", map: "segment", indices: which }, {
        type: "scatter3d", mode: "lines", x, y, z, line: { width: 4, color: COLORS[calo] },
        name: `${calo.toUpperCase()} cells`, hoverinfo: "name" }));
    }
  }
  if (o.clusters) {
    const e = o.clusters.fields.energy, emax = Math.max(1, ...e);
    traces.push(register("view3d", "clusters", { layer: "clusters", role: "clusters", map: "point" }, {
      type: "scatter3d", mode: "markers", x: o.clusters.position.x, y: o.clusters.position.y, z: o.clusters.position.z,
      // squares like the hits: plotly makes each 3-D marker symbol's triangles from text, once per symbol
      marker: { size: e.map((v) => 3 + 7 * Math.sqrt(Math.max(v, 0) / emax)), color: COLORS.clusters, symbol: "square" },
      name: "clusters", hoverinfo: "name" }));
  }
  if (o.jets && o.jets.n) {
    // every cone in one mesh: plotly pays per trace, and busy events have a hundred jets
    const f = o.jets.fields, x = [], y = [], z = [], i = [], j = [], k = [], jetAxes = [[], [], []];
    for (let a = 0; a < o.jets.n; a++) {
      const theta = 2 * Math.atan(Math.exp(-f.eta[a])), d = direction(f.eta[a], f.phi[a]), L = jetLength(f.pt[a]);
      [0, 1, 2].forEach((q) => jetAxes[q].push(0, d[q] * L, null));
      const g = coneGeometry(f.eta[a], f.phi[a], jetLength(f.pt[a]), (o.jets.cone_r || 0.4) * Math.sin(theta));
      const base = x.length;
      x.push(...g.x); y.push(...g.y); z.push(...g.z);
      i.push(...g.i.map((v) => v + base)); j.push(...g.j.map((v) => v + base)); k.push(...g.k.map((v) => v + base));
    }
    traces.push(register("view3d", "jet-axes", { layer: "jets", role: "jets", map: "segment" }, {
      type: "scatter3d", mode: "lines", x: jetAxes[0], y: jetAxes[1], z: jetAxes[2], line: { width: 3, color: COLORS.jets },
      name: "jets", hoverinfo: "name" }));
    traces.push(register("view3d", "jets", { layer: "jets", role: "jets", map: "stride", stride: CONE_VERTICES, late: true }, {
      type: "mesh3d", x, y, z, i, j, k, color: COLORS.jets, opacity: 0.35, flatshading: true, name: "jets",
      hoverinfo: "name", showscale: false, lighting: { ambient: 0.8, diffuse: 0.3, specular: 0, fresnel: 0 } }));
  }
  for (const role of LEPTONS) {
    const obj = o[role];
    if (!obj || !obj.n) continue;
    const [rmax, zmax] = leptonReach(role);
    const x = [], y = [], z = [];
    for (let a = 0; a < obj.n; a++) {
      const d = direction(obj.fields.eta[a], obj.fields.phi[a]), L = reachAlong(d, rmax, zmax);
      x.push(0, d[0] * L, null); y.push(0, d[1] * L, null); z.push(0, d[2] * L, null);
    }
    traces.push(register("view3d", role, { layer: role, role, map: "segment" }, {
      type: "scatter3d", mode: "lines", x, y, z, name: role, hoverinfo: "name",
      line: { width: role === "muons" ? 6 : 4, color: COLORS[role], dash: role === "photons" ? "dash" : "solid" } }));
  }
  if (scene.met) {
    const L = metLength(scene.met.pt), c = Math.cos(scene.met.phi), s = Math.sin(scene.met.phi);
    traces.push(register("view3d", "met", { layer: "met", role: "met", map: "met" }, {
      type: "scatter3d", mode: "lines", x: [0, L * c], y: [0, L * s], z: [0, 0], name: "missing E_T",
      line: { width: 6, color: COLORS.met, dash: "dash" }, hoverinfo: "name" }));
    const head = coneGeometry(0, scene.met.phi, 40, 0.25);
    // the cone's apex is at the origin: mirrored through the arrow's tip, it points outwards from there
    traces.push(register("view3d", "met-head", { layer: "met" }, {
      type: "mesh3d", x: head.x.map((v) => L * c - v), y: head.y.map((v) => L * s - v), z: head.z.map((v) => -v),
      i: head.i, j: head.j, k: head.k, color: COLORS.met, flatshading: true, hoverinfo: "skip", showscale: false,
      lighting: { ambient: 0.9, diffuse: 0.2, specular: 0, fresnel: 0 } }));
  }
  // highlight (related objects) and selection, redrawn on every click
  traces.push(register("view3d", "hl-lines", { layer: "highlight" }, { type: "scatter3d", mode: "lines", x: [], y: [],
    z: [], line: { width: 7, color: COLORS.highlight }, hoverinfo: "skip", name: "related" }));
  traces.push(register("view3d", "hl-points", { layer: "highlight" }, { type: "scatter3d", mode: "markers", x: [],
    y: [], z: [], marker: { size: 4, color: COLORS.highlight, symbol: "square" }, hoverinfo: "skip", name: "related" }));
  traces.push(register("view3d", "sel", { layer: "highlight" }, { type: "scatter3d", mode: "lines+markers", x: [],
    y: [], z: [], line: { width: 8, color: COLORS.selected }, marker: { size: 5, color: COLORS.selected, symbol: "square" },
    hoverinfo: "skip", name: "selected" }));
  // axes that draw nothing and have no tick labels or titles: plotly turns the labels of a 3-D axis into
  // triangles (vectorized text) even when the axis is hidden, which costs a cold page a fifth of a second
  const axis = { visible: true, showbackground: false, showgrid: false, zeroline: false, showline: false,
    showticklabels: false, ticks: "", showspikes: false, tickmode: "array", tickvals: [], title: { text: "" } };
  const layout = {
    paper_bgcolor: COLORS.background, plot_bgcolor: COLORS.background, margin: { l: 0, r: 0, t: 24, b: 0 },
    showlegend: false, uirevision: "keep",
    title: { text: "3-D", font: { color: COLORS.axis, size: 12 }, x: 0.01, y: 0.99 },
    // fixed ranges: every event is seen the same way, whatever reaches far out (a muon, a long jet)
    scene: { bgcolor: COLORS.background, aspectmode: "manual", aspectratio: { x: 1, y: 1, z: VIEW_Z / VIEW_R },
      xaxis: { ...axis, range: [-VIEW_R, VIEW_R] }, yaxis: { ...axis, range: [-VIEW_R, VIEW_R] },
      zaxis: { ...axis, range: [-VIEW_Z, VIEW_Z] },
      camera: { eye: { x: 1.25, y: -1.05, z: 0.55 }, up: { x: 0, y: 1, z: 0 } } },
  };
  return { traces, layout };
}

function circle(r, n = 120) {
  const x = [], y = [];
  for (let s = 0; s <= n; s++) { const p = (2 * Math.PI * s) / n; x.push(r * Math.cos(p)); y.push(r * Math.sin(p)); }
  return [x, y];
}

function annulusPolygon(r0, r1) {
  const [xo, yo] = circle(r1), [xi, yi] = circle(r0);
  return [[...xo, ...xi.reverse()], [...yo, ...yi.reverse()]];
}

function axes2d(xTitle, yTitle, xRange, yRange, title) {
  const axis = (t, range) => ({ title: { text: t, font: { size: 11, color: COLORS.axis } }, range, gridcolor: COLORS.grid,
    zeroline: false, color: COLORS.axis, tickfont: { size: 10 } });
  return {
    paper_bgcolor: COLORS.background, plot_bgcolor: COLORS.background, showlegend: false, uirevision: "keep",
    margin: { l: 46, r: 8, t: 22, b: 34 }, dragmode: "pan", hovermode: "closest",
    title: { text: title, font: { color: COLORS.axis, size: 12 }, x: 0.01, y: 0.98 },
    xaxis: axis(xTitle, xRange), yaxis: { ...axis(yTitle, yRange), scaleanchor: "x", scaleratio: 1 },
  };
}

function jetWedge(eta, phi, pt, R, proj) {
  // wedges stay inside the projections' ranges, so that every jet's tip can be clicked
  let L = jetLength(pt);
  if (proj === "rphi") {
    const theta = 2 * Math.atan(Math.exp(-eta)), l = Math.min(295, L * Math.sin(theta) + 20);
    const a = phi - R, b = phi + R;
    return { x: [0, l * Math.cos(a), l * Math.cos(phi) * 1.02, l * Math.cos(b), 0],
      y: [0, l * Math.sin(a), l * Math.sin(phi) * 1.02, l * Math.sin(b), 0], tip: [l * Math.cos(phi), l * Math.sin(phi)] };
  }
  const sign = Math.sin(phi) >= 0 ? 1 : -1;
  const th = (e) => 2 * Math.atan(Math.exp(-e));
  const t0 = th(eta - R), t1 = th(eta + R), t = th(eta);
  L = Math.min(L, 295 / Math.max(Math.sin(t), 1e-6), 600 / Math.max(Math.abs(Math.cos(t)), 1e-6));
  return { x: [0, L * Math.cos(t0), L * Math.cos(t), L * Math.cos(t1), 0],
    y: [0, sign * L * Math.sin(t0), sign * L * Math.sin(t), sign * L * Math.sin(t1), 0],
    tip: [L * Math.cos(t), sign * L * Math.sin(t)] };
}

function build2d(scene, proj) {
  const view = proj === "rphi" ? "viewRphi" : "viewRz";
  const det = scene.detector, o = scene.objects, traces = [];
  const line = (name, meta, x, y, style, type = "scatter") => traces.push(register(view, name, meta,
    { type, mode: "lines", x, y, hoverinfo: "skip", ...style }));
  // detector
  if (proj === "rphi") {
    const xs = [], ys = [];
    for (const l of det.tracker.barrel) { const [x, y] = circle(l.r); xs.push(...x, null); ys.push(...y, null); }
    line("tracker", { layer: "detector" }, xs, ys, { line: { color: COLORS.tracker, width: 1 }, opacity: 0.45 });
    for (const c of det.calorimeters.filter((c) => c.part === "barrel")) {
      const [x, y] = annulusPolygon(c.r_min, c.r_max);
      line(`calo-${c.code}`, { layer: "detector" }, x, y, { fill: "toself", line: { width: 0 },
        fillcolor: c.calo === "ecal" ? "rgba(46,139,87,0.22)" : "rgba(65,105,225,0.18)" });
    }
    const [x, y] = circle(det.solenoid.radius);
    line("solenoid", { layer: "detector" }, x, y, { line: { color: COLORS.solenoid, width: 2 }, opacity: 0.6 });
  } else {
    const xs = [], ys = [];
    for (const l of det.tracker.barrel) for (const s of [1, -1]) { xs.push(-l.half_length, l.half_length, null); ys.push(s * l.r, s * l.r, null); }
    for (const d of det.tracker.endcap) for (const zs of [1, -1]) for (const s of [1, -1]) { xs.push(zs * d.z, zs * d.z, null); ys.push(s * d.r_min, s * d.r_max, null); }
    line("tracker", { layer: "detector" }, xs, ys, { line: { color: COLORS.tracker, width: 1 }, opacity: 0.45 });
    for (const c of det.calorimeters) {
      const fill = c.calo === "ecal" ? "rgba(46,139,87,0.22)" : "rgba(65,105,225,0.18)";
      const px = [], py = [];
      for (const s of [1, -1]) {
        if (c.part === "barrel") { px.push(-c.z_max, c.z_max, c.z_max, -c.z_max, -c.z_max, null); py.push(s * c.r_min, s * c.r_min, s * c.r_max, s * c.r_max, s * c.r_min, null); }
        else for (const zs of [1, -1]) { px.push(zs * c.z_min, zs * c.z_max, zs * c.z_max, zs * c.z_min, zs * c.z_min, null); py.push(s * c.r_min, s * c.r_min, s * c.r_max, s * c.r_max, s * c.r_min, null); }
      }
      line(`calo-${c.code}`, { layer: "detector" }, px, py, { fill: "toself", line: { width: 0 }, fillcolor: fill });
    }
    const R = det.solenoid.radius, H = det.solenoid.half_length;
    line("solenoid", { layer: "detector" }, [-H, H, null, -H, H], [R, R, null, -R, -R], { line: { color: COLORS.solenoid, width: 2 }, opacity: 0.6 });
  }
  // hits
  if (o.hits) {
    const f = o.hits.fields;
    const x = proj === "rphi" ? f.x : f.z;
    const y = proj === "rphi" ? f.y : f.x.map((v, a) => (f.y[a] >= 0 ? 1 : -1) * Math.hypot(v, f.y[a]));
    traces.push(register(view, "hits", { layer: "hits", role: "hits", map: "point" }, { type: "scattergl", mode: "markers",
      x, y, marker: { size: 3, color: COLORS.hits }, name: "tracker hits", hoverinfo: "name" }));
  }
  if (o.tracks) {
    const [x, y, owner] = helixArrays(o.tracks, [...Array(o.tracks.n).keys()], proj);
    traces.push(register(view, "tracks", { layer: "tracks", role: "tracks", map: "point", indices: owner },
      // SVG: one path of thin lines costs the software renderer a third of WebGL's thick-line triangles
      { type: "scatter", mode: "lines", x, y, line: { width: 1.5, color: COLORS.tracks }, name: "tracks", hoverinfo: "name" }));
  }
  if (o.cells) {
    // summed per phi sector (r-phi) or per ring and half (r-z), as towers: a projection shows
    // where the energy is; the cells themselves are in the 3-D view
    const towers = { ecal: projectedTowers("ecal", proj), hcal: projectedTowers("hcal", proj) };
    const longest = Math.max(1e-9, ...towers.ecal.sums, ...towers.hcal.sums);
    for (const calo of ["ecal", "hcal"]) {
      const [x, y] = towerPolygons(towers[calo], 100 / longest);
      traces.push(register(view, `cells-${calo}`, { layer: calo }, { type: "scatter", mode: "lines", x, y,
        fill: "toself", fillcolor: COLORS[calo], line: { width: 0.5, color: COLORS[calo] }, hoverinfo: "skip" }));
    }
  }
  if (o.clusters) {
    const p = o.clusters.position;
    const x = proj === "rphi" ? p.x : p.z;
    const y = proj === "rphi" ? p.y : p.x.map((v, a) => (p.y[a] >= 0 ? 1 : -1) * Math.hypot(v, p.y[a]));
    traces.push(register(view, "clusters", { layer: "clusters", role: "clusters", map: "point" }, {
      type: "scattergl", mode: "markers", x, y, marker: { size: 6, color: COLORS.clusters, symbol: "diamond" },
      name: "clusters", hoverinfo: "name" }));
  }
  if (o.jets && o.jets.n) {
    const f = o.jets.fields, R = o.jets.cone_r || 0.4, tipx = [], tipy = [], wx = [], wy = [];
    for (let a = 0; a < o.jets.n; a++) {
      const w = jetWedge(f.eta[a], f.phi[a], f.pt[a], R, proj);
      wx.push(...w.x, null); wy.push(...w.y, null);
      tipx.push(w.tip[0]); tipy.push(w.tip[1]);
    }
    traces.push(register(view, "jet-cones", { layer: "jets" }, { type: "scatter", mode: "lines", x: wx, y: wy,
      fill: "toself", fillcolor: "rgba(255,165,0,0.28)", line: { color: COLORS.jets, width: 1 }, hoverinfo: "skip" }));
    traces.push(register(view, "jet-tips", { layer: "jets", role: "jets", map: "point" }, { type: "scatter",
      mode: "markers", x: tipx, y: tipy, marker: { size: 11, color: COLORS.jets, symbol: "circle",
        line: { color: "#000", width: 1 } }, name: "jets", hoverinfo: "name" }));
  }
  for (const role of LEPTONS) {
    const obj = o[role];
    if (!obj || !obj.n) continue;
    const [rmax, zmax] = leptonReach(role);
    const x = [], y = [];
    for (let a = 0; a < obj.n; a++) {
      const d = direction(obj.fields.eta[a], obj.fields.phi[a]), L = reachAlong(d, rmax, zmax);
      if (proj === "rphi") { x.push(0, d[0] * L, null); y.push(0, d[1] * L, null); }
      else { x.push(0, d[2] * L, null); y.push(0, (d[1] >= 0 ? 1 : -1) * d[3] * L, null); }
    }
    traces.push(register(view, role, { layer: role, role, map: "segment" }, { type: "scatter", mode: "lines", x, y,
      line: { width: role === "muons" ? 4 : 3, color: COLORS[role], dash: role === "photons" ? "dash" : "solid" },
      name: role, hoverinfo: "name" }));
  }
  if (scene.met && proj === "rphi") {
    const L = metLength(scene.met.pt);
    traces.push(register(view, "met", { layer: "met", role: "met", map: "met" }, { type: "scatter", mode: "lines+markers",
      x: [0, L * Math.cos(scene.met.phi)], y: [0, L * Math.sin(scene.met.phi)], name: "missing E_T", hoverinfo: "name",
      line: { width: 3, color: COLORS.met, dash: "dash" },
      marker: { size: [0, 14], symbol: "arrow", angleref: "previous", color: COLORS.met } }));
  }
  // highlight and selection on top (SVG above the WebGL layer)
  traces.push(register(view, "hl-lines", { layer: "highlight" }, { type: "scatter", mode: "lines", x: [], y: [],
    line: { width: 4, color: COLORS.highlight }, hoverinfo: "skip" }));
  traces.push(register(view, "hl-points", { layer: "highlight" }, { type: "scatter", mode: "markers", x: [], y: [],
    marker: { size: 5, color: COLORS.highlight }, hoverinfo: "skip" }));
  traces.push(register(view, "sel", { layer: "highlight" }, { type: "scatter", mode: "lines+markers", x: [], y: [],
    line: { width: 5, color: COLORS.selected }, marker: { size: 7, color: COLORS.selected }, hoverinfo: "skip" }));
  const spec = PROJECTIONS[view], layout = axes2d(spec.xTitle, spec.yTitle, spec.x, spec.y, spec.title);
  return { traces, layout };
}

// ------------------------------------------------------------------ drawing

function frames() { return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))); }

/** Draw the event; true once it is on screen (else the caller waits for the frame). With the WebGL views: the 3-D view first (on screen when this sets S.drawn3d), then
 * the two projections, all in a few frames; plotly.js is never loaded. With plotly.js: the 3-D view
 * first too on a cold page, its traces built before waiting for plotly.js, which is still compiling. */
async function draw(scene) {
  S.drawn3d = false;
  const t0 = performance.now();
  const fast = await view3dFast();
  // built while the event before was shown, if the settings it was built with still hold
  const ahead = scene._ahead, fresh = ahead && fast && ahead.minCellEnergy === S.minCellEnergy;
  scene._ahead = null; // its traces are drawn once: the highlight changes them afterwards
  info = fresh ? ahead.info : new Map();
  const built = fresh ? ahead.built : { view3d: build3d(scene) };
  const t1 = performance.now();
  let t2 = t1, t3, t4;
  for (const t of built.view3d.traces) t.visible = visibleFor(info.get(t.uid).layer);
  const projections = ["viewRphi", "viewRz"];
  const drawFast = (view) => {
    $(view).querySelectorAll(".view-message").forEach((m) => m.remove()); // left by a failed load
    for (const t of built[view].traces) t.visible = visibleFor(info.get(t.uid).layer);
    fastOf(view).react(built[view].traces);
  };
  if (fast) {
    // the WebGL view draws everything at once, semi-transparent surfaces too
    drawFast("view3d");
    if (S.loads === 0) await frames(); // a cold page: the 3-D view on screen before the projections are built
    S.drawn3d = true;
    t3 = performance.now();
    if (!built.viewRphi) {
      built.viewRphi = build2d(scene, "rphi");
      built.viewRz = build2d(scene, "rz");
    }
    t4 = performance.now();
    for (const view of projections) if (fastOf(view)) drawFast(view);
    await frames();
    if (S.loads > 0) t3 = performance.now(); // the next event: all three views come in the same frame
  }
  const slow = (fast ? projections : VIEWS).filter((v) => !fastOf(v));
  if (slow.length) {
    const Plotly = await loadPlotly();
    t2 = fast ? S.plotlyReadyMs : performance.now();
    // plotly renders WebGL at twice the screen's pixels by default: four times the fill work, which a
    // software renderer (no GPU) feels on every frame; the screen's own density is sharp enough
    const config = { displaylogo: false, responsive: true, scrollZoom: true,
      plotGlPixelRatio: Math.max(1, Math.min(2, window.devicePixelRatio || 1)),
      modeBarButtonsToRemove: ["toImage", "sendDataToCloud", "select2d", "lasso2d"] };
    const show = (view) => {
      const gd = $(view);
      if (!gd.data) gd.textContent = ""; // a message left by a failed load
      for (const t of built[view].traces) t.visible = visibleFor(info.get(t.uid).layer);
      return Plotly.react(gd, built[view].traces, built[view].layout, config);
    };
    if (fast) {
      await Promise.all(slow.map(show));
    } else if (S.loads === 0) {
      // a cold page: the 3-D view alone first, then the projections (their SVG work would hold its frame back).
      // The first 3-D frame leaves out what is semi-transparent (calorimeter surfaces, jet cones; jets show as
      // their axes): plotly's WebGL scene draws everything once more for depth when anything is, which
      // in software costs a fifth to a third of the frame. They follow once the projections are drawn.
      const all = built.view3d.traces;
      built.view3d.traces = all.filter((t) => !info.get(t.uid).late);
      await show("view3d");
      await frames();
      S.drawn3d = true;
      t3 = performance.now();
      built.viewRphi = build2d(scene, "rphi");
      built.viewRz = build2d(scene, "rz");
      t4 = performance.now();
      await Promise.all(projections.map(show));
      built.view3d.traces = all;
      await show("view3d");
    } else {
      // the next event in an open page: all three at once, the GPU's frame beside the projections' SVG
      built.viewRphi = build2d(scene, "rphi");
      built.viewRz = build2d(scene, "rz");
      t4 = performance.now();
      await Promise.all(VIEWS.map(show));
      await frames();
      S.drawn3d = true;
      t3 = performance.now();
    }
    for (const view of slow) {
      const gd = $(view);
      if (!gd._giodClick) {
        gd.on("plotly_click", (ev) => onPlotClick(ev));
        gd._giodClick = true;
      }
    }
  }
  Object.assign(S.timings, { build3d_ms: t1 - t0, plotly_wait_ms: Math.max(0, t2 - t1), view3d_ms: t3 - t1,
    first_draw_at_ms: t3, projections_ms: performance.now() - Math.min(t3, t4), renderer: S.renderer });
  S.counts = countsOf(scene);
  return !slow.length; // the WebGL views waited for their frame on screen; plotly's promises do not
}

function visibleFor(layer) { return layer === "highlight" || layer === undefined ? true : !!S.layers[layer]; }

function countsOf(scene) {
  const o = scene.objects, n = (r) => (o[r] ? o[r].n : 0);
  return {
    detector: 1, hits: n("hits"), tracks: n("tracks"), ecal: o.cells ? cellsOf("ecal").length : 0,
    hcal: o.cells ? cellsOf("hcal").length : 0, clusters: n("clusters"), jets: n("jets"), muons: n("muons"),
    electrons: n("electrons"), photons: n("photons"), taus: n("taus"), met: scene.met ? 1 : 0,
  };
}

function tracesOf(gd, pred) {
  const out = [];
  (gd.data || []).forEach((t, i) => { if (pred(info.get(t.uid) || {}, t)) out.push(i); });
  return out;
}

async function setLayer(key, on) {
  S.layers[key] = !!on;
  const box = document.querySelector(`#layers input[data-layer="${key}"]`);
  if (box) box.checked = !!on;
  if (!S.ready) return;
  for (const view of VIEWS) {
    const fast = fastOf(view);
    if (fast) for (const [uid, m] of info) if (m.layer === key && uid.startsWith(`${view}_`)) fast.visible(uid, !!on);
  }
  const slow = VIEWS.filter((v) => !fastOf(v));
  if (!slow.length) return;
  const Plotly = await loadPlotly();
  await Promise.all(slow.map((view) => {
    const gd = $(view), idx = tracesOf(gd, (m) => m.layer === key);
    return idx.length ? Plotly.restyle(gd, { visible: !!on }, idx) : null;
  }));
}

function objectLabel(role, k) {
  const o = objectsOf(role);
  if (!o) return `${role} ${k}`;
  const f = o.fields;
  const bits = [];
  if (f.pt) bits.push(`pT ${formatNumber(f.pt[k])}`);
  else if (f.energy) bits.push(`E ${formatNumber(f.energy[k])}`);
  if (f.eta) bits.push(`η ${formatNumber(f.eta[k])}`);
  return `${o.collection}[${k}] ${bits.join(" ")}`;
}

/** The object (role, index) a point of a trace belongs to, or null. */
function objectOf(uid, n) {
  const meta = info.get(uid);
  if (!meta || !meta.role) return null;
  let k = null;
  switch (meta.map) {
    case "point": k = meta.indices ? meta.indices[n] : n; break;
    case "segment": k = Math.floor(n / 3); if (meta.indices) k = meta.indices[k]; break;
    case "one": k = meta.index; break;
    case "stride": k = Math.floor(n / meta.stride); break;
    case "met": return { role: "met", index: 0 };
    default: return null;
  }
  return k === null || k === undefined ? null : { role: meta.role, index: k };
}

function onPlotClick(ev) {
  const p = ev && ev.points && ev.points[0];
  const hit = p ? objectOf(p.data.uid, p.pointNumber) : null;
  if (hit) track(select(hit.role, hit.index));
}

function geometryOf(role, indices, proj) {
  // lines (x, y[, z]) or points for the highlight and selection traces
  const o = objectsOf(role), det = S.scene.detector;
  if (!o || !indices.length) return null;
  if (role === "tracks") return { kind: "lines", xyz: helixArrays(o, indices, proj).slice(0, proj === "3d" ? 3 : 2) };
  if (role === "hits" || role === "clusters") {
    const src = role === "hits" ? o.fields : o.position;
    const x = indices.map((i) => src.x[i]), y = indices.map((i) => src.y[i]), z = indices.map((i) => src.z[i]);
    if (proj === "3d") return { kind: "points", xyz: [x, y, z] };
    if (proj === "rphi") return { kind: "points", xyz: [x, y] };
    return { kind: "points", xyz: [z, x.map((v, a) => (y[a] >= 0 ? 1 : -1) * Math.hypot(v, y[a]))] };
  }
  if (role === "cells") {
    if (proj === "3d") return { kind: "lines", xyz: towerSegments(indices, scale()) };
    const which = proj === "rphi" ? indices.filter((c) => det.cells[o.fields.subdetector[c]].part === "barrel") : indices;
    return { kind: "lines", xyz: cellSegments(which, proj, scale()) };
  }
  if (role === "jets" || LEPTONS.includes(role)) {
    const xs = [], ys = [], zs = [];
    for (const a of indices) {
      const f = o.fields;
      if (role === "jets" && proj !== "3d") {
        const w = jetWedge(f.eta[a], f.phi[a], f.pt[a], o.cone_r || 0.4, proj);
        xs.push(...w.x, null); ys.push(...w.y, null);
      } else {
        const d = direction(f.eta[a], f.phi[a]);
        const L = role === "jets" ? jetLength(f.pt[a]) : reachAlong(d, ...leptonReach(role));
        if (proj === "3d") { xs.push(0, d[0] * L, null); ys.push(0, d[1] * L, null); zs.push(0, d[2] * L, null); }
        else if (proj === "rphi") { xs.push(0, d[0] * L, null); ys.push(0, d[1] * L, null); }
        else { xs.push(0, d[2] * L, null); ys.push(0, (d[1] >= 0 ? 1 : -1) * d[3] * L, null); }
      }
    }
    return { kind: "lines", xyz: proj === "3d" ? [xs, ys, zs] : [xs, ys] };
  }
  if (role === "met" && S.scene.met) {
    const L = metLength(S.scene.met.pt), c = Math.cos(S.scene.met.phi), s = Math.sin(S.scene.met.phi);
    if (proj === "rz") return null;
    return { kind: "lines", xyz: proj === "3d" ? [[0, L * c], [0, L * s], [0, 0]] : [[0, L * c], [0, L * s]] };
  }
  return null;
}

function merge(parts, dims) {
  const out = Array.from({ length: dims }, () => []);
  for (const p of parts) {
    if (!p) continue;
    for (let d = 0; d < dims; d++) out[d].push(...p.xyz[d], null);
  }
  return out;
}

async function redrawHighlight() {
  const Plotly = VIEWS.every(fastOf) ? null : await loadPlotly();
  const h = S.highlight, sel = S.selected;
  const jobs = [];
  for (const view of VIEWS) {
    const gd = $(view);
    const proj = view === "view3d" ? "3d" : view === "viewRphi" ? "rphi" : "rz";
    const dims = proj === "3d" ? 3 : 2;
    const lineParts = [], pointParts = [];
    for (const role of ["tracks", "jets", ...LEPTONS]) {
      const g = geometryOf(role, h[role] || [], proj);
      if (g) lineParts.push(g);
    }
    for (const role of ["hits", "clusters"]) {
      const g = geometryOf(role, h[role] || [], proj);
      if (g) pointParts.push(g);
    }
    if (h.cells && h.cells.length) {
      const g = geometryOf("cells", h.cells, proj);
      if (g) lineParts.push(g);
    }
    const selGeo = sel ? geometryOf(sel.role, [sel.index], proj) : null;
    const uid = (name) => uidFor(view, name);
    const find = (name) => (gd.data || []).findIndex((t) => t.uid === uid(name));
    const update = (name, arrays) => {
      const fast = fastOf(view);
      if (fast) { fast.restyle(uid(name), { x: arrays[0], y: arrays[1], z: arrays[2] }); return; }
      const i = find(name);
      if (i < 0) return;
      const keys = dims === 3 ? ["x", "y", "z"] : ["x", "y"];
      const patch = {};
      keys.forEach((k, d) => { patch[k] = [arrays[d]]; });
      jobs.push(Plotly.restyle(gd, patch, [i]));
    };
    update("hl-lines", merge(lineParts, dims));
    update("hl-points", merge(pointParts, dims));
    update("sel", selGeo ? merge([selGeo], dims) : Array.from({ length: dims }, () => []));
  }
  await Promise.all(jobs);
}

async function select(role, k) {
  if (!S.scene) return;
  if (role === "met") {
    S.selected = { role, index: 0 };
    S.highlight = { hits: [], tracks: [], cells: [], clusters: [], jets: [] };
  } else {
    if (!objectsOf(role) || k < 0 || k >= objectsOf(role).n) return;
    S.selected = { role, index: k };
    S.highlight = highlightOf(role, k);
  }
  renderInfo();
  await redrawHighlight();
  S.highlightDrawn = (S.highlightDrawn || 0) + 1;
}

async function clearSelection() {
  S.selected = null;
  S.highlight = { hits: [], tracks: [], cells: [], clusters: [], jets: [] };
  renderInfo();
  if (S.ready) await redrawHighlight();
}

// ------------------------------------------------------------------ side panel

function renderLayers() {
  const box = $("layers");
  box.textContent = "";
  for (const l of LAYERS) {
    const n = S.counts[l.key] || 0;
    const input = el("input", { type: "checkbox", "data-layer": l.key });
    input.checked = S.layers[l.key];
    input.disabled = !n;
    input.addEventListener("change", () => track(setLayer(l.key, input.checked)));
    box.append(el("label", { title: n ? "" : "not in this event" }, input,
      el("span", { class: "swatch", style: `background:${l.color}` }), l.label,
      el("span", { class: "count" }, l.key === "detector" ? "" : n.toLocaleString("en-US"))));
  }
}

function renderCellControl() {
  const box = $("cell-threshold");
  box.textContent = "";
  const cells = objectsOf("cells");
  if (!cells) return;
  const shown = cells.fields.energy.filter((e) => e >= S.minCellEnergy).length;
  const input = el("input", { type: "number", id: "min-cell-energy", min: 0, step: 0.05, value: String(S.minCellEnergy),
    style: "width:5.5em" });
  input.addEventListener("change", () => track((async () => {
    const v = Number(input.value);
    if (!(v >= 0)) return;
    S.minCellEnergyAsked = v;
    S.minCellEnergy = v;
    await draw(S.scene);
    await redrawHighlight();
    renderCellControl();
  })()));
  box.append(el("label", { for: "min-cell-energy" }, "3-D cells ≥ "), input, " GeV",
    el("div", { class: "muted", id: "cells-shown" }, `${shown.toLocaleString("en-US")} of ${cells.n.toLocaleString("en-US")} ` +
      "cells in 3-D; the projections sum them all"));
}

function renderInfo() {
  const box = $("info");
  box.textContent = "";
  const sel = S.selected;
  if (!sel) { box.append(el("span", { class: "muted" }, "click an object in a view or in the lists below")); return; }
  if (sel.role === "met") {
    const m = S.scene.met;
    box.append(el("div", {}, el("b", {}, "missing transverse energy")),
      el("table", {}, el("tr", {}, el("td", {}, "E_T miss"), el("td", { class: "num" }, formatNumber(m.pt), " GeV")),
        el("tr", {}, el("td", {}, "φ"), el("td", { class: "num" }, formatNumber(m.phi))),
        el("tr", {}, el("td", {}, "from"), el("td", {}, m.source))));
    return;
  }
  const o = objectsOf(sel.role), k = sel.index;
  const oid = `db${S.scene.database}/${o.collection}/${S.scene.entry}#${k}`;
  box.append(el("div", {}, el("b", {}, `${o.type} `), el("span", { class: "oid mono", id: "selected-oid" }, oid)),
    el("button", { class: "link", onclick: () => track(clearSelection()) }, "clear"));
  const rows = Object.entries(o.fields).map(([name, col]) =>
    el("tr", {}, el("td", {}, name), el("td", { class: "num mono" }, formatNumber(col[k]))));
  if (o.energy && !o.fields.energy) rows.push(el("tr", {}, el("td", {}, "energy"), el("td", { class: "num mono" }, formatNumber(o.energy[k]))));
  box.append(el("table", {}, rows));
  for (const [rname, rel] of Object.entries(o.relations)) {
    const targets = related(rel, k);
    const items = targets.slice(0, 40).map((i) => rel.role
      ? el("button", { class: "link", onclick: () => track(select(rel.role, i)), title: objectLabel(rel.role, i) }, String(i))
      : el("span", { class: "mono" }, ` ${i}`));
    box.append(el("div", {}, el("span", { class: "muted" }, `${rname} → ${rel.target} (${targets.length})${rel.role ? "" : ", not drawn"}: `),
      items, targets.length > 40 ? el("span", { class: "muted" }, ` … ${targets.length - 40} more`) : null));
  }
  const back = pointingTo(sel.role, k);
  if (back.length) {
    box.append(el("div", {}, el("span", { class: "muted" }, "used by: "),
      back.slice(0, 20).map(([r, i]) => el("button", { class: "link", onclick: () => track(select(r, i)) },
        `${objectsOf(r).collection}[${i}]`))));
  }
  const h = S.highlight, lit = Object.entries(h).filter(([, v]) => v.length).map(([r, v]) => `${v.length} ${r}`);
  if (lit.length) box.append(el("div", { class: "muted", id: "highlight-summary" }, `highlighted: ${lit.join(", ")}`));
}

function renderObjects() {
  const box = $("objects");
  box.textContent = "";
  const order = [["jets", "pt"], ["muons", "pt"], ["electrons", "pt"], ["photons", "pt"], ["taus", "pt"],
    ["clusters", "energy"], ["tracks", "pt"]];
  for (const [role, key] of order) {
    const o = objectsOf(role);
    if (!o || !o.n) continue;
    const idx = [...Array(o.n).keys()].sort((a, b) => (o.fields[key][b] ?? 0) - (o.fields[key][a] ?? 0)).slice(0, 50);
    const rows = idx.map((i) => el("tr", { class: "clickable", "data-role": role, "data-index": i, onclick: () => track(select(role, i)) },
      el("td", {}, String(i)), el("td", { class: "num" }, formatNumber(o.fields[key][i])),
      el("td", { class: "num" }, o.fields.eta ? formatNumber(o.fields.eta[i]) : ""),
      el("td", { class: "num" }, o.fields.phi ? formatNumber(o.fields.phi[i]) : "")));
    box.append(el("details", { open: role === "jets" || LEPTONS.includes(role) ? true : null },
      el("summary", {}, `${o.collection} (${o.n.toLocaleString("en-US")})`),
      el("div", { class: "list" }, el("table", {}, el("tr", {}, el("th", {}, "#"), el("th", { class: "num" }, key),
        el("th", { class: "num" }, "η"), el("th", { class: "num" }, "φ")), rows))));
  }
}

function renderTags() {
  const sc = S.scene, box = $("tags");
  box.textContent = "";
  const rows = [["dataset", sc.dataset], ["entry", sc.entry], ["run", sc.run], ["event", sc.event],
    ["database", sc.database], ["version", sc.version]];
  if (sc.met) rows.push(["missing E_T", `${formatNumber(sc.met.pt)} GeV at φ ${formatNumber(sc.met.phi)}`]);
  for (const [k, v] of Object.entries(sc.tags)) if (!["run", "event"].includes(k)) rows.push([k, v]);
  box.append(el("table", {}, rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num mono" },
    typeof v === "number" ? formatNumber(v) : String(v ?? "–"))))));
  for (const note of sc.notes || []) box.append(el("div", { class: "muted" }, note));
}

function status(text) { $("status").textContent = text; }

// ------------------------------------------------------------------ loading

function enc(s) { return encodeURIComponent(s); }

function failed(err, what) {
  S.error = { status: err.status ?? 0, kind: err.kind ?? "Error", message: err.message };
  showMessage(`${what}: ${explain(err)}`);
  status("no event drawn");
}

// Scenes asked for, newest last: the event shown, and the one a step of ▶ or ◀ goes to, fetched while
// the physicist looks at this one. An entry's content never changes; a scene older than SCENE_TTL_MS is
// asked for again all the same (the dataset's number of entries grows).
const scenes = new Map(); // "token|path" -> {at, promise}
const SCENES_KEPT = 4;
const SCENE_TTL_MS = 120_000;
let lastStep = +1;

function scenePath(dataset, entry) { return `/api/v1/events/${enc(dataset)}/${entry}`; }

/** The scene of an entry: from the prefetched ones, from the request the page's head started, or asked now. */
function sceneOf(dataset, entry) {
  const path = scenePath(dataset, entry), key = `${token()}|${path}`, now = performance.now();
  const kept = scenes.get(key);
  scenes.delete(key);
  if (kept && now - kept.at < SCENE_TTL_MS) { scenes.set(key, kept); return kept.promise; }
  const early = window.giodEarly;
  let promise;
  if (early && !early.used && early.path === path && early.token === token()) {
    early.used = true; // the request the page's head started for the event in its address
    promise = answer(early.response);
  } else {
    promise = api(path);
  }
  const item = { at: now, promise };
  scenes.set(key, item);
  promise.catch(() => { if (scenes.get(key) === item) scenes.delete(key); });
  while (scenes.size > SCENES_KEPT) scenes.delete(scenes.keys().next().value);
  return promise;
}

/** Fetch the entry a step in the last direction goes to, once this one is drawn. */
function prefetch() {
  const next = S.entry + lastStep, n = S.scene && S.scene.entries;
  if (next < 0 || (n !== undefined && next >= n)) { S.prefetching = Promise.resolve(null); return; }
  // the scene's geometry once it is here, when the page is idle (a click is never held back long)
  const idle = () => new Promise((r) => (window.requestIdleCallback ? requestIdleCallback(r, { timeout: 500 }) : setTimeout(r)));
  S.prefetching = sceneOf(S.dataset, next).then((scene) => idle().then(() => { prepare(scene); return next; }), () => null)
    .catch((err) => { S.prefetchError = String(err); return null; }); // the step draws it all the same
}

async function load(dataset, entry) {
  if (!dataset) { showMessage("choose a dataset"); return false; }
  if (!Number.isInteger(entry) || entry < 0) {
    S.error = { status: 0, kind: "input", message: "the entry must be a whole number, 0 or more" };
    showMessage(S.error.message);
    return false;
  }
  const t0 = performance.now();
  S.loading = true; S.error = null; S.ready = false; S.timings = {};
  showMessage("");
  status(`loading ${dataset} entry ${entry}…`);
  try {
    let scene;
    try {
      scene = await sceneOf(dataset, entry);
      S.sceneMs = performance.now();
    } catch (err) {
      failed(err, `cannot show ${dataset} entry ${entry}`);
      await view3dFast(); // its start would wipe a message already written into the 3-D view
      for (const view of VIEWS) purge(view, explain(err));
      return false;
    }
    const t1 = performance.now();
    S.scene = scene; S.dataset = dataset; S.entry = entry;
    await view3dFast(); // its renderer sets how many cells the 3-D view shows
    S.minCellEnergy = S.minCellEnergyAsked ?? defaultCellThreshold(scene);
    S.selected = null; S.highlight = { hits: [], tracks: [], cells: [], clusters: [], jets: [] };
    let onScreen;
    try {
      onScreen = await draw(scene);
    } catch (err) {
      failed(err, "cannot draw the event");
      return false;
    }
    if (!onScreen) await frames();
    const t2 = performance.now();
    S.loads += 1;
    S.ready = true;
    // first draw: the event on screen in the 3-D view; total: in all three views
    Object.assign(S.timings, { since_navigation_ms: t2, fetch_ms: t1 - t0, draw_ms: t2 - t1, total_ms: t2 - t0,
      first_draw_ms: S.timings.first_draw_at_ms - t0, plotly_ready_ms: S.plotlyReadyMs, scene_ms: S.sceneMs });
    $("entry").value = String(entry);
    $("entries").textContent = scene.entries !== undefined ? `of ${scene.entries.toLocaleString("en-US")}` : "";
    if (scene.run !== null) $("run").value = String(scene.run);
    if (scene.event !== null) $("event").value = String(scene.event);
    const dsSelect = $("dataset");
    if ([...dsSelect.options].some((o) => o.value === dataset)) dsSelect.value = dataset;
    const extra = S.minCellEnergyAsked !== null ? `&min_cell_energy=${S.minCellEnergyAsked}` : "";
    history.replaceState(null, "", `/display?dataset=${enc(dataset)}&entry=${entry}${extra}`);
    document.title = `giod · ${dataset} #${entry}`;
    renderLayers(); renderCellControl(); renderInfo(); renderObjects(); renderTags();
    const c = S.counts;
    status(`${dataset} entry ${entry}: ${c.hits.toLocaleString()} hits, ${c.tracks} tracks, ` +
      `${(c.ecal + c.hcal).toLocaleString()} cells, ${c.jets} jets · drawn in ${Math.round(t2 - t0)} ms`);
    prefetch();
    return true;
  } finally {
    S.loading = false;
  }
}

function purge(view, text) {
  const gd = $(view), fast = fastOf(view);
  if (fast) {
    fast.clear();
    gd.querySelectorAll(".view-message").forEach((m) => m.remove());
    gd.append(el("div", { class: "muted view-message", style: "padding:12px;position:absolute;top:0;left:0" }, text));
    return;
  }
  if (window.Plotly && gd.data) window.Plotly.purge(gd);
  gd.textContent = "";
  gd.append(el("div", { class: "muted", style: "padding:12px" }, text));
}

async function step(delta) {
  const entry = Number($("entry").value) + delta;
  if (entry < 0) return;
  lastStep = delta < 0 ? -1 : +1;
  await load($("dataset").value, entry);
}

async function findRunEvent() {
  const ds = $("dataset").value, run = $("run").value.trim(), ev = $("event").value.trim();
  if (!/^\d+$/.test(run) || !/^\d+$/.test(ev)) { showMessage("give a run and an event number (whole numbers)"); return; }
  try {
    const ans = await api(`/api/v1/events/${enc(ds)}/lookup?run=${run}&event=${ev}`);
    await load(ds, ans.entry);
  } catch (err) { failed(err, `cannot find run ${run} event ${ev}`); }
}

async function passing(direction) {
  const ds = $("dataset").value, where = $("where").value.trim();
  const after = S.entry !== null && S.dataset === ds ? S.entry : direction === "next" ? -1 : 0;
  const q = new URLSearchParams({ after: String(after), direction });
  if (where) q.set("where", where);
  try {
    const ans = await api(`/api/v1/events/${enc(ds)}/next?${q}`);
    const ok = await load(ds, ans.entry);
    if (ok && where) showMessage(`event ${ans.position + 1} of ${ans.passing.toLocaleString()} passing ${where}`, "info");
  } catch (err) { failed(err, where ? `no event passing "${where}"` : "no event"); }
}

async function downloadPhoenix() {
  if (!S.scene) return;
  try {
    const blob = await api(`/api/v1/events/${enc(S.dataset)}/${S.entry}?format=phoenix`, { blob: true });
    const a = el("a", { href: URL.createObjectURL(blob), download: `${S.dataset}-${S.entry}.phoenix.json` });
    document.body.append(a); a.click(); a.remove();
  } catch (err) { failed(err, "cannot export the event"); }
}

async function fillDatasets(wanted) {
  const select = $("dataset");
  try {
    const list = await api("/api/v1/datasets");
    select.textContent = "";
    for (const d of list) select.append(el("option", { value: d.name }, d.name));
    if (wanted && !list.some((d) => d.name === wanted)) select.append(el("option", { value: wanted }, wanted));
    if (wanted) select.value = wanted;
    return list.map((d) => d.name);
  } catch (err) {
    if (wanted) { select.textContent = ""; select.append(el("option", { value: wanted }, wanted)); }
    failed(err, "cannot list the datasets");
    return null;
  }
}

async function main() {
  tokenBox($("bar"), async () => {
    const names = await fillDatasets($("dataset").value || null);
    const ds = $("dataset").value || (names && names[0]);
    if (ds) await track(load(ds, Number($("entry").value) || 0));
  });
  $("go").addEventListener("click", () => track(load($("dataset").value, Number($("entry").value))));
  $("entry").addEventListener("keydown", (e) => { if (e.key === "Enter") $("go").click(); });
  $("prev").addEventListener("click", () => track(step(-1)));
  $("next").addEventListener("click", () => track(step(+1)));
  $("find").addEventListener("click", () => track(findRunEvent()));
  $("where-next").addEventListener("click", () => track(passing("next")));
  $("where-prev").addEventListener("click", () => track(passing("prev")));
  $("where").addEventListener("keydown", (e) => { if (e.key === "Enter") track(passing("next")); });
  $("phoenix").addEventListener("click", downloadPhoenix);
  $("dataset").addEventListener("change", () => track(load($("dataset").value, 0)));
  renderLayers();
  // the 3-D view's WebGL context starts while the event is on its way; without it plotly.js is needed at once
  view3dFast().then((fast) => { if (!fast) loadPlotly(); });

  const params = new URLSearchParams(location.search);
  const threshold = params.get("min_cell_energy");
  if (threshold !== null && Number(threshold) >= 0) S.minCellEnergyAsked = Number(threshold);
  const wanted = params.get("dataset");
  const entryText = params.get("entry");
  const listed = fillDatasets(wanted);
  if (wanted) {
    const entry = entryText === null || entryText === "" ? 0 : Number(entryText);
    if (!/^\d+$/.test(entryText ?? "0")) {
      S.error = { status: 0, kind: "input", message: `entry ${JSON.stringify(entryText)} is not a whole number` };
      showMessage(S.error.message);
      status("no event drawn");
      return;
    }
    await load(wanted, entry);
  } else {
    const names = await listed;
    if (names && names.length) await load(names[0], 0);
    else if (names) { showMessage("this federation has no datasets yet", "info"); status("no event drawn"); }
  }
}

// every action that redraws chains here, so that scripts can wait for the drawing to settle
let pending = Promise.resolve();
function track(promise) {
  pending = Promise.all([pending, promise.catch(() => null)]);
  return promise;
}

// for scripts and tests: the same actions as the controls
Object.assign(S, {
  load: (dataset, entry) => track(load(dataset, entry)),
  select: (role, k) => track(select(role, k)),
  setLayer: (key, on) => track(setLayer(key, on)),
  clearSelection: () => track(clearSelection()),
  /** Forget the scenes fetched so far (the next load asks the server). */
  forget: () => scenes.clear(),
  /** Resolves once every redraw asked for so far is on screen. */
  async settled() {
    let seen;
    do { seen = pending; await seen; } while (seen !== pending);
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  },
  /** Page coordinates of the tip of jet j's axis in the WebGL 3-D view (null without it). */
  jetTip3d(j) {
    if (!fastView || !S.scene || !S.scene.objects.jets) return null;
    const f = S.scene.objects.jets.fields, d = direction(f.eta[j], f.phi[j]), L = jetLength(f.pt[j]);
    const [x, y] = fastView.project(d[0] * L, d[1] * L, d[2] * L), box = fastView.canvas.getBoundingClientRect();
    return { x: box.left + x, y: box.top + y, inside: x >= 0 && y >= 0 && x < box.width && y < box.height };
  },
  /** Page coordinates of the clickable tip of jet j in a projection ("viewRphi" or "viewRz"). */
  jetTip(j, view = "viewRphi") {
    const fast = fastOf(view);
    if (fast) {
      if (!S.scene || !S.scene.objects.jets) return null;
      const o = S.scene.objects.jets, f = o.fields;
      const w = jetWedge(f.eta[j], f.phi[j], f.pt[j], o.cone_r || 0.4, PROJECTIONS[view].proj);
      const [x, y] = fast.project(w.tip[0], w.tip[1]), box = fast.canvas.getBoundingClientRect();
      return { x: box.left + x, y: box.top + y, inside: x >= 0 && y >= 0 && x < box.width && y < box.height };
    }
    const gd = $(view), i = gd.data.findIndex((t) => t.uid === uidFor(view, "jet-tips"));
    if (i < 0) return null;
    const t = gd.data[i], L = gd._fullLayout, box = gd.getBoundingClientRect();
    return { x: box.left + L.xaxis._offset + L.xaxis.l2p(t.x[j]), y: box.top + L.yaxis._offset + L.yaxis.l2p(t.y[j]) };
  },
});

track(main());

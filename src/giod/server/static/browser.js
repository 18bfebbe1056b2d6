// The giod federation browser: datasets, data models (relations as a graph), databases, versions,
// sites and replicas with their states, live rates from /metrics; searchable; tokens as Bearer headers.
//
// window.giodBrowser exposes the page's state (ready, error, datasets, models, rates) for scripts and tests.

import { api, explain, el, formatBytes, formatNumber, formatTime, showMessage, tokenBox } from "./common.js";

const B = { ready: false, error: null, federation: null, datasets: [], summaries: {}, models: {}, rates: null,
  selected: null, search: "" };
window.giodBrowser = B;
const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const RATE_SECONDS = 2;

// ------------------------------------------------------------------ loading

async function load() {
  B.ready = false;
  B.error = null;
  showMessage("");
  try {
    B.federation = await api("/api/v1/federation");
  } catch (err) {
    B.error = { status: err.status, message: err.message };
    showMessage(explain(err));
    for (const id of ["datasets", "sites", "versions", "routes"]) $(id).textContent = "";
    $("federation-summary").textContent = "";
    return;
  }
  const fed = B.federation;
  $("federation-summary").textContent =
    `version ${fed.version} · ${fed.datasets.length} dataset${fed.datasets.length === 1 ? "" : "s"} · ` +
    `${fed.sites.length} site${fed.sites.length === 1 ? "" : "s"}`;
  const [datasets, versions] = await Promise.all([
    api("/api/v1/datasets").catch((err) => { note(err); return []; }),
    api("/api/v1/versions?limit=25").catch((err) => { note(err); return []; }),
  ]);
  B.datasets = datasets;
  // summaries and models of every dataset, in parallel: the search looks into the models
  await Promise.all(datasets.map(async (d) => {
    const [summary, model] = await Promise.all([
      api(`/api/v1/datasets/${enc(d.name)}/summary`).catch((err) => ({ error: explain(err) })),
      api(`/api/v1/models/${enc(d.name)}`).catch((err) => ({ error: explain(err) })),
    ]);
    B.summaries[d.name] = summary;
    B.models[d.name] = model;
  }));
  renderDatasets();
  renderSites(fed.sites);
  renderVersions(versions);
  applySearch();
  const wanted = new URLSearchParams(location.search).get("dataset") || B.selected || (datasets[0] && datasets[0].name);
  if (wanted) await showDataset(wanted);
  B.ready = true;
}

function note(err) {
  if (!B.error) B.error = { status: err.status, message: err.message };
  showMessage(explain(err));
}

// ------------------------------------------------------------------ tables

function searchText(...parts) { return parts.flat().filter(Boolean).join(" ").toLowerCase(); }

function modelWords(model) {
  if (!model || model.error) return [];
  const words = [model.name];
  for (const c of model.collections) {
    words.push(c.name, c.type, c.container, ...c.fields.map((f) => `${c.name}.${f.name}`),
      ...c.relations.map((r) => `${c.name}.${r.name}`));
  }
  words.push(...model.tags.map((t) => t.name));
  return words;
}

function renderDatasets() {
  const table = $("datasets");
  table.textContent = "";
  table.append(el("tr", {}, el("th", {}, "name"), el("th", {}, "model"), el("th", { class: "num" }, "events"),
    el("th", { class: "num" }, "databases"), el("th", { class: "num" }, "size"), el("th", {}, "")));
  if (!B.datasets.length) {
    table.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no datasets (giod demo or giod import make some)")));
    return;
  }
  for (const d of B.datasets) {
    const s = B.summaries[d.name] || {}, m = B.models[d.name] || {};
    const row = el("tr", { class: "clickable", "data-dataset": d.name, "data-search": searchText(d.name, modelWords(m)),
      onclick: () => showDataset(d.name) },
      el("td", {}, el("b", {}, d.name)), el("td", { class: "muted" }, m.name || ""),
      el("td", { class: "num" }, s.error ? "–" : formatNumber(s.n_events)),
      el("td", { class: "num" }, s.error ? "–" : formatNumber(s.n_databases)),
      el("td", { class: "num" }, s.error ? "–" : formatBytes(s.bytes)),
      el("td", {}, el("a", { href: `/display?dataset=${enc(d.name)}&entry=0`, onclick: (e) => e.stopPropagation() }, "display")));
    table.append(row);
    if (s.error) table.append(el("tr", { "data-search": searchText(d.name) }, el("td", { colspan: 6, class: "muted" }, s.error)));
  }
}

function renderSites(sites) {
  const table = $("sites");
  table.textContent = "";
  table.append(el("tr", {}, el("th", {}, "name"), el("th", {}, "location"), el("th", { class: "num" }, "distance")));
  for (const s of sites) {
    table.append(el("tr", { "data-search": searchText(s.name, s.url) }, el("td", {}, s.name),
      el("td", { class: "mono" }, s.url), el("td", { class: "num" }, String(s.distance))));
  }
}

function renderVersions(versions) {
  const table = $("versions");
  table.textContent = "";
  table.append(el("tr", {}, el("th", { class: "num" }, "version"), el("th", {}, "when"), el("th", {}, "what")));
  for (const v of versions) {
    table.append(el("tr", { "data-search": searchText(String(v.version), v.description) },
      el("td", { class: "num" }, String(v.version)), el("td", { class: "muted" }, formatTime(v.created)),
      el("td", {}, v.description)));
  }
}

// ------------------------------------------------------------------ one dataset

async function showDataset(name) {
  B.selected = name;
  for (const row of document.querySelectorAll("#datasets tr[data-dataset]")) {
    row.classList.toggle("selected", row.dataset.dataset === name);
  }
  $("detail-title").textContent = `dataset ${name}`;
  const body = $("detail-body");
  body.className = "";
  body.textContent = "";
  const model = B.models[name] || await api(`/api/v1/models/${enc(name)}`).catch((err) => ({ error: explain(err) }));
  const s = B.summaries[name] || {};
  if (model.error) { body.append(el("div", { class: "muted" }, model.error)); return; }
  body.append(el("div", {},
    el("span", {}, `model `, el("b", {}, model.name), ` (schema ${model.schema_id}) · `),
    el("span", {}, s.error ? "" : `${formatNumber(s.n_events)} events in ${formatNumber(s.n_databases)} databases, ${formatBytes(s.bytes)} · `),
    el("a", { href: `/display?dataset=${enc(name)}&entry=0` }, "open in the event display")));
  if (model.description) body.append(el("p", { class: "muted" }, model.description));
  body.append(el("h3", {}, "data model"), modelGraph(model));
  body.append(el("h3", {}, "collections"), collectionsTable(model));
  if (model.tags.length) {
    body.append(el("h3", {}, `tags (${model.tags.length})`),
      el("div", { class: "mono", id: "tags" }, model.tags.map((t) =>
        el("span", { "data-search": searchText(t.name), title: `${t.dtype}${t.doc ? ": " + t.doc : ""}` }, t.name, " "))));
  }
  const dbBox = el("div", { id: "databases" }, el("span", { class: "muted" }, "loading databases…"));
  body.append(el("h3", {}, "databases"), dbBox);
  applySearch();
  try {
    const dbs = await api(`/api/v1/datasets/${enc(name)}/databases`);
    dbBox.textContent = "";
    dbBox.append(databasesTable(dbs));
  } catch (err) {
    dbBox.textContent = explain(err);
  }
  applySearch();
}

function collectionsTable(model) {
  const table = el("table", { id: "collections" }, el("tr", {}, el("th", {}, "collection"), el("th", {}, "type"),
    el("th", {}, "container"), el("th", {}, "fields"), el("th", {}, "relations")));
  for (const c of model.collections) {
    table.append(el("tr", { "data-search": searchText(modelWords({ name: "", collections: [c], tags: [] })) },
      el("td", {}, el("b", {}, c.name), c.role ? el("div", { class: "muted" }, `drawn as ${c.role}`) : null),
      el("td", {}, c.type), el("td", { class: "mono" }, c.container),
      el("td", { class: "mono" }, c.fields.map((f) => el("span", { title: f.doc || "" },
        `${f.name}:${f.dtype}${f.shape.length ? "[" + f.shape.join("][") + "]" : ""} `))),
      el("td", { class: "mono" }, c.relations.map((r) => el("div", {}, `${r.name} → ${r.target}${r.many ? "[]" : ""}`)))));
  }
  return table;
}

function modelGraph(model) {
  // collections as boxes (grouped by container, at most 7 to a column), relations as arrows
  const W = 150, H = 34, GX = 70, GY = 14, PER = 7;
  const byContainer = new Map();
  for (const c of model.collections) {
    if (!byContainer.has(c.container)) byContainer.set(c.container, []);
    byContainer.get(c.container).push(c);
  }
  const columns = [];
  for (const [container, list] of byContainer) {
    for (let s = 0; s < list.length; s += PER) columns.push({ container, items: list.slice(s, s + PER) });
  }
  const pos = new Map();
  columns.forEach((col, ci) => col.items.forEach((c, ri) => pos.set(c.name, { x: 10 + ci * (W + GX), y: 28 + ri * (H + GY) })));
  const width = 20 + columns.length * (W + GX) - GX, rows = Math.max(1, ...columns.map((c) => c.items.length));
  const height = 40 + rows * (H + GY);
  const NS = "http://www.w3.org/2000/svg";
  const s = (tag, attrs = {}, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const svg = s("svg", { class: "model", id: "model-graph", viewBox: `0 0 ${width} ${height}`, height: String(height) });
  const defs = s("defs");
  const marker = s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#7f8ba0" }));
  defs.append(marker);
  svg.append(defs);
  columns.forEach((col, ci) => {
    if (col.items === byContainer.get(col.container).slice(0, PER)) {
      svg.append(s("text", { x: 10 + ci * (W + GX), y: 16, class: "sub" }, `container ${col.container}`));
    }
  });
  const names = new Set(model.collections.map((c) => c.name));
  for (const c of model.collections) {
    for (const r of c.relations) {
      if (!names.has(r.target)) continue;
      const a = pos.get(c.name), b = pos.get(r.target);
      let d, lx, ly;
      if (c.name === r.target) {
        d = `M ${a.x + W} ${a.y + 8} C ${a.x + W + 40} ${a.y - 10}, ${a.x + W + 40} ${a.y + H + 10}, ${a.x + W} ${a.y + H - 8}`;
        lx = a.x + W + 24; ly = a.y + H / 2;
      } else if (Math.abs(a.x - b.x) < 1) {
        const x = a.x + W, k = 30 + Math.abs(a.y - b.y) / 6;
        d = `M ${x} ${a.y + H / 2} C ${x + k} ${a.y + H / 2}, ${x + k} ${b.y + H / 2}, ${x} ${b.y + H / 2}`;
        lx = x + k * 0.8; ly = (a.y + b.y) / 2 + H / 2;
      } else {
        const left = a.x < b.x, x1 = left ? a.x + W : a.x, x2 = left ? b.x : b.x + W, k = (x2 - x1) / 2;
        d = `M ${x1} ${a.y + H / 2} C ${x1 + k} ${a.y + H / 2}, ${x2 - k} ${b.y + H / 2}, ${x2} ${b.y + H / 2}`;
        lx = (x1 + x2) / 2; ly = (a.y + b.y) / 2 + H / 2 - 3;
      }
      svg.append(s("path", { d, class: `edge${r.many ? " many" : ""}`, "marker-end": "url(#arrow)",
        "data-relation": `${c.name}.${r.name}` }));
      svg.append(s("text", { x: lx, y: ly, class: "edge-label", "text-anchor": "middle" }, r.name));
    }
  }
  for (const c of model.collections) {
    const p = pos.get(c.name);
    const g = s("g", { class: `node${c.role ? " role" : ""}`, "data-collection": c.name });
    g.append(s("rect", { x: p.x, y: p.y, width: W, height: H, rx: 4 }));
    g.append(s("text", { x: p.x + 8, y: p.y + 14 }, c.name));
    g.append(s("text", { x: p.x + 8, y: p.y + 27, class: "sub" }, `${c.type} · ${c.fields.length} fields`));
    svg.append(g);
  }
  return svg;
}

function replicaSummary(container) {
  const sites = new Map((B.federation ? B.federation.sites : []).map((s) => [s.id, s.name]));
  return container.site_ids.map((id) => sites.get(id) || `site ${id}`).join(", ") || "no good copy";
}

function databasesTable(dbs) {
  const table = el("table", {}, el("tr", {}, el("th", { class: "num" }, "id"), el("th", {}, "entries"),
    el("th", { class: "num" }, "events"), el("th", { class: "num" }, "size"), el("th", {}, "created"),
    el("th", {}, "program"), el("th", {}, "containers (good copies)")));
  if (!dbs.length) table.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no databases yet")));
  for (const db of dbs) {
    const row = el("tr", { class: "clickable", "data-database": db.id,
      "data-search": searchText(`db${db.id}`, db.program, db.writer, db.containers.map((c) => c.name)),
      title: "click for the replicas and their states" },
    el("td", { class: "num" }, `db${db.id}`), el("td", { class: "mono" }, `${db.first_entry}–${db.first_entry + db.n_events - 1}`),
    el("td", { class: "num" }, formatNumber(db.n_events)), el("td", { class: "num" }, formatBytes(db.bytes)),
    el("td", { class: "muted" }, formatTime(db.created)), el("td", {}, db.program || "–"),
    el("td", {}, db.containers.map((c) => el("div", { class: "mono" }, `${c.name}: ${replicaSummary(c)}`))));
    const detail = el("tr", { hidden: true }, el("td", { colspan: 7 }));
    row.addEventListener("click", () => toggleReplicas(db, detail));
    table.append(row, detail);
  }
  return table;
}

async function toggleReplicas(db, detail) {
  if (!detail.hidden) { detail.hidden = true; return; }
  detail.hidden = false;
  const cell = detail.firstChild;
  cell.textContent = "loading replicas…";
  try {
    const answers = await Promise.all(db.containers.map((c) => api(`/api/v1/containers/${c.id}/replicas`)));
    const table = el("table", { class: "replicas" }, el("tr", {}, el("th", {}, "container"), el("th", {}, "file"),
      el("th", { class: "num" }, "size"), el("th", {}, "checksum"), el("th", {}, "replicas")));
    db.containers.forEach((c, i) => {
      table.append(el("tr", {}, el("td", {}, c.name), el("td", { class: "mono" }, c.path),
        el("td", { class: "num" }, formatBytes(c.size)), el("td", { class: "mono" }, c.checksum),
        el("td", {}, answers[i].map((r) => el("div", {}, `${r.site.name}: `,
          el("span", { class: `replica-state state-${["good", "lost", "bad", "corrupt"].includes(r.state) ? r.state : "other"}` }, r.state))))));
    });
    cell.textContent = "";
    cell.append(table);
  } catch (err) {
    cell.textContent = explain(err);
  }
}

// ------------------------------------------------------------------ search

function applySearch() {
  const q = B.search.trim().toLowerCase();
  for (const row of document.querySelectorAll("[data-search]")) {
    row.classList.toggle("hidden-by-search", q !== "" && !row.dataset.search.includes(q));
  }
  for (const g of document.querySelectorAll("#model-graph g.node")) {
    const name = g.dataset.collection.toLowerCase();
    const model = B.models[B.selected];
    const c = model && model.collections ? model.collections.find((x) => x.name === g.dataset.collection) : null;
    const hit = q !== "" && (name.includes(q) || (c && searchText(modelWords({ name: "", collections: [c], tags: [] })).includes(q)));
    g.querySelector("rect").style.stroke = hit ? "#ffc857" : "";
  }
}

// ------------------------------------------------------------------ live rates

function parseMetrics(text) {
  const out = { requests: new Map(), scalars: {} };
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+([-+0-9.eEinfINFNaN]+)$/);
    if (!m) continue;
    const [, name, , labels, value] = m;
    const v = Number(value);
    if (name === "giod_requests_total") {
      const route = (labels.match(/route="([^"]*)"/) || [])[1] || "?";
      const status = Number((labels.match(/status="([^"]*)"/) || [])[1] || 0);
      const r = out.requests.get(route) || { n: 0, errors: 0 };
      r.n += v;
      if (status >= 400) r.errors += v;
      out.requests.set(route, r);
    } else if (!labels) {
      out.scalars[name] = v;
    }
  }
  return out;
}

let lastMetrics = null;

async function pollMetrics() {
  let text;
  try {
    text = await api("/metrics", { text: true });
  } catch (err) {
    $("rates").textContent = explain(err);
    B.rates = null;
    return;
  }
  const now = performance.now() / 1000, m = parseMetrics(text);
  const prev = lastMetrics;
  lastMetrics = { t: now, m };
  const total = (mm) => [...mm.requests.values()].reduce((a, r) => a + r.n, 0);
  const dt = prev ? now - prev.t : 0;
  const rate = (a, b) => (dt > 0 ? Math.max(0, (a - b) / dt) : 0);
  const sc = m.scalars, ps = prev ? prev.m.scalars : {};
  B.rates = {
    requests_per_s: prev ? rate(total(m), total(prev.m)) : 0,
    errors_per_s: prev ? rate(sc.giod_errors_total || 0, ps.giod_errors_total || 0) : 0,
    sent_bytes_per_s: prev ? rate(sc.giod_bytes_sent_total || 0, ps.giod_bytes_sent_total || 0) : 0,
    received_bytes_per_s: prev ? rate(sc.giod_bytes_received_total || 0, ps.giod_bytes_received_total || 0) : 0,
    open_files: sc.giod_open_files || 0,
    cache_hit_ratio: sc.giod_query_cache_hit_ratio || 0,
    requests_total: total(m),
    samples: (B.rates ? B.rates.samples : 0) + 1,
  };
  const r = B.rates;
  const cards = [
    [r.requests_per_s.toFixed(1), "requests / s"], [r.errors_per_s.toFixed(2), "errors / s"],
    [formatBytes(Math.round(r.sent_bytes_per_s)) + "/s", "sent"], [formatBytes(Math.round(r.received_bytes_per_s)) + "/s", "received"],
    [String(r.open_files), "open files"], [(100 * r.cache_hit_ratio).toFixed(0) + " %", "query cache hits"],
    [formatNumber(r.requests_total), "requests since start"],
  ];
  $("rates").textContent = "";
  for (const [value, label] of cards) $("rates").append(el("div", { class: "rate" }, el("div", { class: "value" }, value), el("div", { class: "label" }, label)));
  $("rates-age").textContent = `every ${RATE_SECONDS} s`;
  const routes = [...m.requests.entries()].map(([route, v]) => {
    const before = prev && prev.m.requests.get(route);
    return { route, total: v.n, errors: v.errors, rate: prev ? rate(v.n, before ? before.n : 0) : 0 };
  }).sort((a, b) => b.rate - a.rate || b.total - a.total).slice(0, 8);
  const table = $("routes");
  table.textContent = "";
  table.append(el("tr", {}, el("th", {}, "route"), el("th", { class: "num" }, "req/s"), el("th", { class: "num" }, "total"),
    el("th", { class: "num" }, "errors")));
  for (const x of routes) {
    table.append(el("tr", { "data-search": searchText(x.route) }, el("td", { class: "mono" }, x.route),
      el("td", { class: "num" }, x.rate.toFixed(1)), el("td", { class: "num" }, formatNumber(x.total)),
      el("td", { class: "num" }, formatNumber(x.errors))));
  }
  applySearch();
}

// ------------------------------------------------------------------ start

tokenBox($("bar"), () => { lastMetrics = null; load(); pollMetrics(); });
$("search").addEventListener("input", (e) => { B.search = e.target.value; applySearch(); });
load();
pollMetrics();
setInterval(pollMetrics, RATE_SECONDS * 1000);

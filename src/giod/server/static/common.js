// What both giod pages share: the token, JSON requests, error messages, small DOM helpers.

const TOKEN_KEY = "giod.token";

export function token() {
  try { return localStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
}

export function setToken(value) {
  try {
    if (value) localStorage.setItem(TOKEN_KEY, value); else localStorage.removeItem(TOKEN_KEY);
  } catch { /* private mode: the token lives until the page is closed */ }
}

export class ApiError extends Error {
  constructor(status, kind, message) {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

/** GET a JSON (or text) answer of the giod API, sending the token as a Bearer header. */
export async function api(path, { text = false, blob = false } = {}) {
  const headers = { Accept: text ? "text/plain" : "application/json" };
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  return answer(fetch(path, { headers }), { text, blob });
}

/** The body of a response (a promise of one, from fetch), or an ApiError saying why there is none. */
export async function answer(request, { text = false, blob = false } = {}) {
  let response;
  try {
    response = await request;
  } catch (err) {
    throw new ApiError(0, "NetworkError", `the server did not answer (${err.message})`);
  }
  if (!response.ok) {
    let body = {};
    try { body = await response.json(); } catch { /* not JSON */ }
    throw new ApiError(response.status, body.error || `HTTP ${response.status}`,
      body.message || response.statusText || "request failed");
  }
  if (blob) return response.blob();
  return text ? response.text() : response.json();
}

/** One line a physicist can act on, for an error from api(). */
export function explain(err) {
  if (!(err instanceof ApiError)) return `unexpected error: ${err && err.message ? err.message : err}`;
  switch (err.status) {
    case 401:
      return `This server needs a token: paste one in the token box above (an administrator creates one ` +
        `with "giod token create --scope read"). Server said: ${err.message}`;
    case 403:
      return `Your token may not read this. Server said: ${err.message}`;
    case 0:
      return `Cannot reach the giod server: ${err.message}`;
    default:
      return err.message;
  }
}

/** Create an element: el("td", {class: "num"}, "12"). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** The token box in the page header: a password field and a button; calls onChange after a change. */
export function tokenBox(container, onChange) {
  const input = el("input", { type: "password", id: "token", placeholder: "token (giod_…)", size: 18,
    autocomplete: "off", "aria-label": "bearer token" });
  input.value = token();
  const use = el("button", { id: "token-use", title: "send this token with every request" }, "use token");
  const clear = el("button", { id: "token-clear", title: "forget the token" }, "×");
  use.addEventListener("click", () => { setToken(input.value.trim()); onChange(); });
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") use.click(); });
  clear.addEventListener("click", () => { input.value = ""; setToken(""); onChange(); });
  container.append(el("span", { class: "group" }, el("label", { class: "small", for: "token" }, "token"), input, use,
    clear));
  return input;
}

export function showMessage(text, kind = "error") {
  const box = document.getElementById("message");
  if (!box) return;
  if (!text) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.className = kind;
  box.textContent = text;
}

export function formatBytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

export function formatNumber(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  if (typeof v === "number") {
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : v.toPrecision(5).replace(/\.?0+$/, "");
  }
  return String(v);
}

export function formatTime(unix) {
  if (!unix) return "–";
  return new Date(unix * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

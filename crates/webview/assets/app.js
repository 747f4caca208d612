// kansoku web: the page. The URL holds the whole state (view, from, to, step,
// threshold, drill); every change is a history entry, so back and forward
// work and a view can be shared. Data comes from /api/v1/view; labels are
// only ever set as text, never as markup.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const KEYS = ["view", "from", "to", "step", "threshold", "drill", "probe"];
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
  "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363"];
const OTHER = "#c7c7c7";

let current = null;   // the last answer drawn
let serial = 0;       // answers drawn so far (the browser test waits on it)
let loading = 0;      // the request in flight (older answers are dropped)
let liveTimer = null;

function stateFromUrl() {
  const p = new URLSearchParams(location.search);
  const s = {};
  for (const k of KEYS) {
    const v = p.get(k);
    if (v !== null && v !== "") s[k] = v;
  }
  return s;
}

function query(s) {
  const p = new URLSearchParams();
  for (const k of KEYS) if (s[k] !== undefined && s[k] !== null && s[k] !== "") p.set(k, String(s[k]));
  return p.toString();
}

function status(text, isError) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

async function load(replace) {
  const s = stateFromUrl();
  const mine = ++loading;
  status("loading…");
  let r, data;
  try {
    r = await fetch("/api/v1/view?" + query(s), { cache: "no-store" });
    data = await r.json();
  } catch (e) {
    if (mine === loading) status("the server did not answer: " + e, true);
    return;
  }
  if (mine !== loading) return;
  if (!r.ok) {
    status(data.error || ("error " + r.status), true);
    document.body.dataset.error = data.error || String(r.status);
    return;
  }
  delete document.body.dataset.error;
  // The URL gets the range and step the server chose, so it can be shared.
  const resolved = Object.assign({}, s, { view: data.view, from: data.from, to: data.to });
  if (s.step !== undefined) resolved.step = data.step;
  if (replace || s.from === undefined || s.to === undefined) {
    history.replaceState(null, "", "?" + query(resolved));
  }
  current = data;
  render(data);
  status(describe(data));
  serial += 1;
  document.body.dataset.ready = String(serial);
  scheduleLive(data);
}

function navigate(change) {
  const s = Object.assign(stateFromUrl(), change);
  for (const k of Object.keys(s)) if (s[k] === undefined || s[k] === null || s[k] === "") delete s[k];
  history.pushState(null, "", "?" + query(s));
  load(false);
}

// While the view reaches the newest data, new summaries are fetched as they come.
function scheduleLive(data) {
  if (liveTimer) clearTimeout(liveTimer);
  liveTimer = null;
  if (data.to >= data.last) liveTimer = setTimeout(() => load(true), 30000);
}

function fmtTime(sec, withDate) {
  const d = new Date(sec * 1000);
  const p = (n) => String(n).padStart(2, "0");
  const hm = p(d.getUTCHours()) + ":" + p(d.getUTCMinutes());
  const md = (d.getUTCMonth() + 1) + "/" + d.getUTCDate();
  return withDate ? md + " " + hm : hm;
}

function fmtFull(sec) {
  return new Date(sec * 1000).toISOString().replace("T", " ").replace(".000Z", " UTC");
}

function si(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
  if (a >= 1e3) return (v / 1e3).toPrecision(3) + "k";
  if (a === 0) return "0";
  return v.toPrecision(3);
}

function group(n) {
  return Number(n).toLocaleString("en-US");
}

function pct(part, whole) {
  return whole > 0 ? (100 * part / whole).toFixed(2) : "0.00";
}

function describe(d) {
  const steps = d.buckets.length;
  return d.summaries + " summaries, " + fmtFull(d.from) + " – " + fmtFull(d.to) + ", " + steps +
    " buckets of " + d.step + " s, threshold " + d.threshold + "%; " + group(d.total.bytes) + " bytes, " +
    group(d.total.packets) + " packets in all (" + group(d.non_ip.packets) + " non-IP)" +
    (d.note ? ". " + d.note : "");
}

// Colors by rank of bytes; catch-alls are "other", always grey.
function colors(d) {
  const order = d.aggregates.map((a, i) => i).filter((i) => !d.aggregates[i].catch_all);
  order.sort((a, b) => d.aggregates[b].total.bytes - d.aggregates[a].total.bytes);
  const c = new Array(d.aggregates.length).fill(OTHER);
  order.forEach((i, rank) => { c[i] = PALETTE[rank % PALETTE.length]; });
  return c;
}

// Stacking order: the largest at the bottom, "other" on top.
function stackOrder(d, key) {
  const idx = d.aggregates.map((a, i) => i);
  idx.sort((a, b) => {
    const A = d.aggregates[a], B = d.aggregates[b];
    if (A.catch_all !== B.catch_all) return A.catch_all ? 1 : -1;
    return B.total[key] - A.total[key];
  });
  return idx;
}

function el(name, attrs, parent) {
  const e = document.createElementNS(SVGNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

const TIME_TICKS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
  604800, 1209600, 2592000];

function drawChart(svg, d, key, palette) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = svg.clientWidth || 560, H = svg.clientHeight || 300;
  const m = { l: 56, r: 10, t: 10, b: 26 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const n = d.buckets.length;
  const scale = key === "bytes" ? 8 / d.step : 1 / d.step;
  const order = stackOrder(d, key);
  // Stacked tops per bucket.
  const base = new Array(n).fill(0);
  const layers = [];
  for (const i of order) {
    const vals = d.aggregates[i][key];
    const lo = base.slice();
    for (let b = 0; b < n; b++) if (vals[b] !== null) base[b] += vals[b] * scale;
    layers.push({ i, lo, hi: base.slice() });
  }
  let ymax = 0;
  for (let b = 0; b < n; b++) if (d.covered[b]) ymax = Math.max(ymax, base[b]);
  if (ymax <= 0) ymax = 1;
  const ystep = niceStep(ymax / 5);
  ymax = Math.ceil(ymax / ystep) * ystep;
  const x = (t) => m.l + (t - d.from) / (d.to - d.from) * pw;
  const y = (v) => m.t + ph - v / ymax * ph;
  // Grid and axes.
  for (let v = 0; v <= ymax + 1e-9; v += ystep) {
    el("line", { x1: m.l, x2: m.l + pw, y1: y(v), y2: y(v), class: "grid" }, svg);
    const t = el("text", { x: m.l - 4, y: y(v) + 4, "text-anchor": "end" }, svg);
    t.textContent = si(v);
  }
  const span = d.to - d.from;
  const tstep = TIME_TICKS.find((s) => span / s <= 8) || TIME_TICKS[TIME_TICKS.length - 1];
  const withDate = span > 86400 || tstep >= 86400;
  for (let t = Math.ceil(d.from / tstep) * tstep; t <= d.to; t += tstep) {
    el("line", { x1: x(t), x2: x(t), y1: m.t, y2: m.t + ph, class: "grid" }, svg);
    const anchor = x(t) > m.l + pw - 24 ? "end" : (x(t) < m.l + 24 ? "start" : "middle");
    const tx = el("text", { x: x(t), y: H - 8, "text-anchor": anchor }, svg);
    tx.textContent = tstep >= 86400 ? fmtTime(t, true).split(" ")[0] : fmtTime(t, withDate);
  }
  el("line", { x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph, class: "axis" }, svg);
  el("line", { x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph, class: "axis" }, svg);
  // Bands: one path per aggregate, a closed shape per run of covered buckets.
  for (const L of layers) {
    const a = d.aggregates[L.i];
    let path = "";
    let b = 0;
    while (b < n) {
      if (!d.covered[b]) { b++; continue; }
      let e = b;
      while (e < n && d.covered[e]) e++;
      let top = "", bottom = "";
      for (let k = b; k < e; k++) {
        const x0 = x(d.buckets[k]).toFixed(1), x1 = x(d.buckets[k] + d.step).toFixed(1);
        top += (k === b ? "M" : "L") + x0 + "," + y(L.hi[k]).toFixed(1) + "L" + x1 + "," + y(L.hi[k]).toFixed(1);
      }
      for (let k = e - 1; k >= b; k--) {
        const x0 = x(d.buckets[k]).toFixed(1), x1 = x(d.buckets[k] + d.step).toFixed(1);
        bottom += "L" + x1 + "," + y(L.lo[k]).toFixed(1) + "L" + x0 + "," + y(L.lo[k]).toFixed(1);
      }
      path += top + bottom + "Z";
      b = e;
    }
    if (!path) continue;
    const p = el("path", { d: path, fill: palette[L.i], class: "band" }, svg);
    p.dataset.label = a.label;
    p.dataset.catchAll = a.catch_all ? "1" : "";
    const title = el("title", {}, p);
    title.textContent = (a.catch_all ? "other (" + a.label + ")" : a.label) + ": " +
      group(a.total[key]) + " " + key;
  }
  const sel = el("rect", { class: "selection", x: 0, y: m.t, width: 0, height: ph, visibility: "hidden" }, svg);
  svg.dataset.plotLeft = String(m.l);
  svg.dataset.plotWidth = String(pw);
  attachDrag(svg, sel, d, m, pw);
}

// Drag to zoom; a click without a drag on a band drills into it.
function attachDrag(svg, sel, d, m, pw) {
  let x0 = null;
  const px = (ev) => {
    const r = svg.getBoundingClientRect();
    const vb = svg.viewBox.baseVal;
    const sx = vb && vb.width ? vb.width / r.width : 1;
    return Math.min(m.l + pw, Math.max(m.l, (ev.clientX - r.left) * sx));
  };
  svg.onmousedown = (ev) => { ev.preventDefault(); x0 = px(ev); };
  svg.onmousemove = (ev) => {
    if (x0 === null) return;
    const x1 = px(ev);
    sel.setAttribute("x", Math.min(x0, x1));
    sel.setAttribute("width", Math.abs(x1 - x0));
    sel.setAttribute("visibility", "visible");
  };
  svg.onmouseup = (ev) => {
    if (x0 === null) return;
    const x1 = px(ev);
    const start = x0;
    x0 = null;
    sel.setAttribute("visibility", "hidden");
    if (Math.abs(x1 - start) < 4) {
      const t = ev.target;
      if (t && t.dataset && t.dataset.label && !t.dataset.catchAll) drill(t.dataset.label);
      return;
    }
    const t = (v) => d.from + (v - m.l) / pw * (d.to - d.from);
    const from = Math.floor(t(Math.min(start, x1)));
    const to = Math.ceil(t(Math.max(start, x1)));
    if (to > from) navigate({ from, to, step: undefined });
  };
  svg.onmouseleave = () => { x0 = null; sel.setAttribute("visibility", "hidden"); };
}

function drill(label) {
  if (current && current.drill === label) return;
  navigate({ drill: label });
}

function renderTable(d, palette) {
  const body = document.querySelector("#table tbody");
  const foot = document.querySelector("#table tfoot");
  body.replaceChildren();
  foot.replaceChildren();
  const idx = d.aggregates.map((a, i) => i);
  idx.sort((a, b) => {
    const A = d.aggregates[a], B = d.aggregates[b];
    if (A.catch_all !== B.catch_all) return A.catch_all ? 1 : -1;
    return B.total.bytes - A.total.bytes;
  });
  const span = d.to - d.from;
  const cell = (tr, text, cls) => {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  };
  for (const i of idx) {
    const a = d.aggregates[i];
    const tr = document.createElement("tr");
    tr.dataset.label = a.label;
    tr.dataset.bytes = String(a.total.bytes);
    tr.dataset.packets = String(a.total.packets);
    if (a.catch_all) tr.className = "other";
    const sw = cell(tr, "", "swatch");
    const s = document.createElement("span");
    s.style.background = palette[i];
    sw.appendChild(s);
    const name = cell(tr, "");
    const own = d.drill !== null && a.label === d.drill;
    if (a.catch_all || own) {
      name.textContent = a.catch_all ? "other (" + a.label + ")" : a.label + " (itself)";
    } else {
      const link = document.createElement("a");
      link.textContent = a.label;
      link.title = "drill into " + a.label;
      link.onclick = (ev) => { ev.preventDefault(); drill(a.label); };
      name.appendChild(link);
    }
    cell(tr, group(a.total.bytes));
    cell(tr, pct(a.total.bytes, d.within.bytes));
    cell(tr, group(a.total.packets));
    cell(tr, pct(a.total.packets, d.within.packets));
    cell(tr, si(a.total.bytes * 8 / span));
    cell(tr, si(a.total.packets / span));
    const pcap = cell(tr, "");
    if (traces && !a.catch_all) {
      // The aggregate's packets in the range drawn, from the traces on the
      // server's host: the server builds the expression from the label.
      const link = document.createElement("a");
      link.textContent = "pcap";
      link.className = "pcap";
      link.title = "the packets of " + a.label + " in this range, from the traces";
      link.href = "/api/v1/packets?" + new URLSearchParams({
        view: d.view, from: String(d.from), to: String(d.to), drill: a.label,
      }).toString();
      link.download = "";
      pcap.appendChild(link);
    }
    body.appendChild(tr);
  }
  const tr = document.createElement("tr");
  cell(tr, "");
  cell(tr, d.drill === null ? "all IP traffic" : "within " + d.drill);
  cell(tr, group(d.within.bytes));
  cell(tr, "100.00");
  cell(tr, group(d.within.packets));
  cell(tr, "100.00");
  cell(tr, si(d.within.bytes * 8 / span));
  cell(tr, si(d.within.packets / span));
  cell(tr, "");
  tr.id = "within";
  foot.appendChild(tr);
}

function renderCrumbs(d) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren();
  const all = document.createElement(d.drill === null ? "strong" : "a");
  all.textContent = "all";
  if (d.drill !== null) all.onclick = () => navigate({ drill: undefined });
  nav.appendChild(all);
  if (d.drill !== null) {
    nav.appendChild(document.createTextNode(" › "));
    const here = document.createElement("strong");
    here.textContent = d.drill;
    nav.appendChild(here);
  }
}

function render(d) {
  document.getElementById("view").value = d.view;
  const s = stateFromUrl();
  document.getElementById("step").value = s.step !== undefined ? String(d.step) : "";
  const th = document.getElementById("threshold");
  if (![...th.options].some((o) => Number(o.value) === d.threshold)) {
    const o = document.createElement("option");
    o.value = String(d.threshold);
    o.textContent = d.threshold + "%";
    th.appendChild(o);
  }
  th.value = [...th.options].find((o) => Number(o.value) === d.threshold).value;
  const palette = colors(d);
  drawChart(document.getElementById("chart-bytes"), d, "bytes", palette);
  drawChart(document.getElementById("chart-packets"), d, "packets", palette);
  renderTable(d, palette);
  renderCrumbs(d);
}

// Whether the server has traces to offer each aggregate's packets from.
let traces = false;

async function loadCatalog() {
  try {
    const r = await fetch("/api/v1/catalog", { cache: "no-store" });
    const c = await r.json();
    if (r.ok) {
      document.getElementById("source").textContent = c.source;
      if (c.traces && !traces) {
        traces = true;
        if (current) render(current);
      }
      if (c.probes.length > 0) {
        const sel = document.getElementById("probe");
        for (const p of c.probes) {
          const o = document.createElement("option");
          o.value = p;
          o.textContent = p;
          sel.appendChild(o);
        }
        sel.value = stateFromUrl().probe || "";
        document.getElementById("probe-label").hidden = false;
      }
    }
  } catch (e) { /* the view says what is wrong */ }
}

function shift(by) {
  if (!current) return;
  const span = current.to - current.from;
  const from = Math.max(0, current.from + Math.round(by * span));
  navigate({ from, to: from + span });
}

document.getElementById("view").onchange = (e) => navigate({ view: e.target.value, drill: undefined });
document.getElementById("probe").onchange = (e) => navigate({ probe: e.target.value || undefined, drill: undefined });
document.getElementById("step").onchange = (e) => navigate({ step: e.target.value || undefined });
document.getElementById("threshold").onchange = (e) => navigate({ threshold: e.target.value });
document.getElementById("earlier").onclick = () => shift(-1);
document.getElementById("later").onclick = () => shift(1);
document.getElementById("zoomout").onclick = () => {
  if (!current) return;
  const span = current.to - current.from;
  navigate({ from: Math.max(0, current.from - span), to: current.to + span, step: undefined });
};
document.getElementById("latest").onclick = () => navigate({ from: undefined, to: undefined, step: undefined });
window.addEventListener("popstate", () => load(false));
window.addEventListener("resize", () => { if (current) render(current); });
loadCatalog();
load(false);

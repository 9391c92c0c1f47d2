// concur serve: the page. Every question goes to this server as the words of `concur solve` / `concur plan`
// (packs, find, given); every answer, derivation, note and error line shown is the server's, which are the CLI's.
// The view and its question live in the URL's hash (#fleet?q=..., #pack?q=..., #plan?q=...): reload or share it.
"use strict";

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) node.append(c);
  return node;
};

const state = { meta: {}, view: "fleet", seq: { fleet: 0, pack: 0, plan: 0, curve: 0 }, timers: {}, plan: null, sort: null };

// -- talking to the server ---------------------------------------------------------------------------------
async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const type = response.headers.get("Content-Type") || "";
  if (type.startsWith("application/json") && !path.startsWith("/api/download/")) return response.json();
  if (!response.ok) return response.json();
  return response.blob();
}

async function meta(packs) {
  const key = packs.join(",");
  if (!state.meta[key]) {
    const response = await fetch("/api/meta?packs=" + encodeURIComponent(key));
    const doc = await response.json();
    if (doc.error) return doc;
    state.meta[key] = doc;
  }
  return state.meta[key];
}

// -- the URL holds the question ------------------------------------------------------------------------------
function readHash() {
  const hash = location.hash.replace(/^#/, "");
  const [view, query] = hash.split("?");
  let question = null;
  if (query) {
    const q = new URLSearchParams(query).get("q");
    try { question = q ? JSON.parse(q) : null; } catch (e) { question = null; }
  }
  return { view: ["fleet", "pack", "plan", "curve"].includes(view) ? view : "fleet", question };
}

function writeHash(view, question) {
  const url = "#" + view + "?q=" + encodeURIComponent(JSON.stringify(question));
  if (location.hash !== url) history.replaceState(null, "", url);
}

// -- fields ------------------------------------------------------------------------------------------------
// One field: label (name), the value, its unit, "solve for" (find), the error line beside it.
function unitText(v) {
  if (!v) return "";
  if (v.choices) return v.choices.join(" | ");
  return v.unit || "";
}

function displayed(value, v) {
  // a scenario value "50 request/s" in the field's own unit is shown as the bare number
  if (typeof value !== "string" || !v || !v.unit) return value === undefined ? "" : String(value);
  const m = value.trim().match(/^([-+0-9.eE_,]+)\s+(.+)$/);
  return m && m[2] === v.unit ? m[1] : value;
}

function fieldRow(prefix, name, doc, opts) {
  const v = doc.variables[name];
  const catalog = doc.catalogs[name];
  const row = el("div", { class: "field", id: `${prefix}-row-${name}` });
  const label = el("label", { for: `${prefix}-field-${name}`, text: name, title: v ? v.doc : `preset: an id of the ${name} catalog` });
  const input = el("input", {
    id: `${prefix}-field-${name}`,
    name,
    type: "text",
    inputmode: catalog || (v && v.choices) ? null : "decimal",
    list: catalog || (v && v.choices) ? `${prefix}-list-${name}` : null,
    placeholder: placeholder(v, catalog),
    title: v ? v.doc : `one of: ${(catalog || []).join(", ")}`,
    spellcheck: "false",
  });
  row.append(label, input);
  if (catalog || (v && v.choices)) {
    const list = el("datalist", { id: `${prefix}-list-${name}` });
    for (const id of catalog || v.choices) list.append(el("option", { value: id }));
    row.append(list);
  }
  row.append(el("span", { class: "unit", text: catalog ? "preset" : unitText(v) }));
  row.append(el("span", { class: "bounds", text: boundsText(v) }));
  if (opts.find && v && !v.choices) {
    const box = el("input", { type: "checkbox", id: `${prefix}-find-${name}`, title: `solve for ${name}` });
    row.append(el("label", { class: "find" }, box, " solve for"));
  } else {
    row.append(el("span", { class: "find" }));
  }
  row.append(el("span", { class: "field-error", id: `${prefix}-error-${name}`, role: "alert" }));
  return row;
}

function placeholder(v, catalog) {
  if (catalog) return "catalog id (type to search)";
  if (!v) return "";
  if (v.default !== null && v.default !== undefined) return `default ${v.default}`;
  if (v.limit) return `optional (${v.limit.replace("_", " ")})`;
  return "";
}

function boundsText(v) {
  if (!v) return "";
  const parts = [];
  if (v.bounds) {
    const [lo, hi] = v.bounds;
    if (lo !== null && hi !== null) parts.push(`${lo} to ${hi}`);
    else if (lo !== null) parts.push(`≥ ${lo}`);
    else if (hi !== null) parts.push(`≤ ${hi}`);
  }
  if (v.integer) parts.push("whole");
  if (v.limit) parts.push(v.limit.replace("_", " "));
  return parts.join(", ");
}

// The question a form asks: its non-empty fields are given, its ticked "solve for" boxes are found.
function formQuestion(prefix, names, packs, answers) {
  const given = {};
  const find = [];
  for (const name of names) {
    const box = $(`${prefix}-find-${name}`);
    const input = $(`${prefix}-field-${name}`);
    if (box && box.checked) { find.push(name); input.disabled = true; continue; }
    if (input) input.disabled = false;
    const value = input ? input.value.trim() : "";
    if (value !== "") given[name] = value;
  }
  for (const name of answers) if (!(name in given) && !find.includes(name)) find.push(name);
  return { packs, find, given };
}

function fillForm(prefix, names, question, doc) {
  for (const name of names) {
    const input = $(`${prefix}-field-${name}`);
    const box = $(`${prefix}-find-${name}`);
    if (!input) continue;
    const value = question.given ? question.given[name] : undefined;
    input.value = value === undefined ? "" : displayed(value, doc.variables[name]);
    if (box) box.checked = (question.solveFor || []).includes(name);
  }
}

function clearErrors(prefix) {
  for (const node of document.querySelectorAll(`#view-${prefix} .field-error`)) node.textContent = "";
  for (const node of document.querySelectorAll(`#view-${prefix} input[aria-invalid]`)) node.removeAttribute("aria-invalid");
  $(`${prefix}-error`).textContent = "";
}

function showError(prefix, error) {
  clearErrors(prefix);
  const line = error.line || "error: " + (error.message || "no answer");
  const beside = error.field ? $(`${prefix}-error-${error.field}`) : null;
  if (beside) {
    beside.textContent = line;
    const input = $(`${prefix}-field-${error.field}`);
    if (input) input.setAttribute("aria-invalid", "true");
  } else {
    $(`${prefix}-error`).textContent = line;
  }
}

// -- hand-off: the command line and downloads ---------------------------------------------------------------
function handoff(prefix, command, question, downloads) {
  const box = $(`${prefix}-handoff`);
  box.replaceChildren();
  const code = el("code", { id: `${prefix}-command`, text: command });
  const copy = el("button", { type: "button", text: "copy" });
  copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(command));
  box.append(el("div", { class: "command" }, el("span", { text: "the same question in a terminal: " }), code, copy));
  if (!downloads.length) return;
  const row = el("div", { class: "downloads" }, el("span", { text: "download: " }));
  for (const [name, label] of downloads) {
    const button = el("button", { type: "button", id: `${prefix}-download-${name.replace(".", "-")}`, text: label });
    button.addEventListener("click", () => download(prefix, name, question));
    row.append(button);
  }
  box.append(row);
}

async function download(prefix, name, question) {
  const result = await post("/api/download/" + name, question);
  if (!(result instanceof Blob)) { showError(prefix, result.error || {}); return; }
  const link = el("a", { href: URL.createObjectURL(result), download: name });
  document.body.append(link);
  link.click();
  link.remove();
}

const SOLVE_DOWNLOADS = [["answer.xlsx", "workbook (.xlsx)"], ["answer.csv", "CSV"], ["answer.json", "JSON"]];

// -- the fleet page ----------------------------------------------------------------------------------------
async function fleetView(question) {
  const doc = await meta(["llm_fleet"]);
  if (doc.error) { $("fleet-error").textContent = doc.error.line; return; }
  const names = doc.fleet.fields;
  const form = $("fleet-form");
  if (!form.dataset.built) {
    for (const name of names) form.append(fieldRow("fleet", name, doc, { find: true }));
    form.addEventListener("input", () => schedule("fleet", askFleet, 250));
    form.addEventListener("change", () => schedule("fleet", askFleet, 0));
    form.dataset.built = "1";
  }
  const start = question || { given: Object.fromEntries(names.filter((n) => n in doc.scenario).map((n) => [n, doc.scenario[n]])) };
  fillForm("fleet", names, start, doc);
  askFleet();
}

function fleetQuestion() {
  const doc = state.meta["llm_fleet"];
  const q = formQuestion("fleet", doc.fleet.fields, ["llm_fleet"], doc.fleet.answers);
  q.solveFor = doc.fleet.fields.filter((n) => $(`fleet-find-${n}`) && $(`fleet-find-${n}`).checked);
  return q;
}

async function askFleet() {
  if (state.view !== "fleet") return; // a field left behind (its change on blur) asks nothing
  const q = fleetQuestion();
  writeHash("fleet", { given: q.given, solveFor: q.solveFor });
  const seq = ++state.seq.fleet;
  const box = $("fleet-answer");
  box.dataset.state = "busy";
  const body = { packs: q.packs, find: q.find, given: q.given };
  const answer = await post("/api/solve", body);
  if (seq !== state.seq.fleet) return; // a newer question is on its way
  if (answer.error) {
    showError("fleet", answer.error);
    box.dataset.state = "error";
    return;
  }
  clearErrors("fleet");
  const table = $("fleet-results");
  table.replaceChildren();
  const shown = [...q.solveFor, ...state.meta["llm_fleet"].fleet.answers.filter((n) => !q.solveFor.includes(n))];
  for (const name of shown) {
    const r = answer.results[name] || (answer.given[name] && { value: answer.given[name].value, unit: answer.given[name].unit });
    if (!r) continue;
    const cell = el("td", { id: `fleet-answer-${name}`, "data-value": r.value, text: formatValue(r.value, r.unit) });
    table.append(el("tr", {}, el("th", { text: name }), cell));
    if (q.solveFor.includes(name)) $(`fleet-field-${name}`).value = r.value === null ? "" : String(round6(r.value));
  }
  table.append(el("tr", {}, el("th", { text: "what binds" }), el("td", { id: "fleet-answer-binds", text: answer.binds || "-" })));
  $("fleet-text").textContent = answer.text;
  $("fleet-why").textContent = answer.why;
  handoff("fleet", answer.command, body, SOLVE_DOWNLOADS);
  box.dataset.command = answer.command;
  box.dataset.state = "done";
}

function round6(x) {
  return typeof x === "number" ? Number(x.toPrecision(6)) : x;
}

function formatValue(value, unit) {
  if (value === null || value === undefined) return "-";
  if (typeof value !== "number") return String(value);
  const text = Number.isInteger(value) ? value.toLocaleString("en-US") : Number(value.toPrecision(6)).toLocaleString("en-US", { maximumSignificantDigits: 6 });
  return unit ? `${text} ${unit}` : text;
}

function schedule(view, fn, delay) {
  clearTimeout(state.timers[view]);
  state.timers[view] = setTimeout(fn, delay);
}

// -- any pack ----------------------------------------------------------------------------------------------
async function packView(question) {
  const all = await meta(["llm_fleet"]);
  const choice = $("pack-choice");
  if (!choice.dataset.built) {
    for (const name of Object.keys(all.packs)) {
      const box = el("input", { type: "checkbox", id: `pack-use-${name}`, value: name });
      box.addEventListener("change", () => buildPack(null));
      choice.append(el("label", { title: all.packs[name] }, box, " " + name));
    }
    choice.dataset.built = "1";
  }
  const q = question || { packs: ["queueing"], given: null, find: [] };
  for (const box of choice.querySelectorAll("input")) box.checked = (q.packs || []).includes(box.value);
  await buildPack(q);
}

function packFields(doc) {
  return [...new Set(Object.keys(doc.presets).concat(Object.keys(doc.variables)))];
}

function chosenPacks() {
  return [...$("pack-choice").querySelectorAll("input:checked")].map((b) => b.value);
}

async function buildPack(question) {
  const packs = chosenPacks();
  const form = $("pack-form");
  form.replaceChildren();
  clearErrors("pack");
  if (!packs.length) { $("pack-text").textContent = ""; return; }
  const doc = await meta(packs);
  if (doc.error) { $("pack-error").textContent = doc.error.line; return; }
  const names = packFields(doc);
  for (const name of names) form.append(fieldRow("pack", name, doc, { find: true }));
  form.oninput = () => schedule("pack", askPack, 300);
  form.onchange = () => schedule("pack", askPack, 0);
  // the URL's question, else the pack's embedded scenario, else its first worked example
  const example = doc.example || { given: {}, find: [] };
  const start = question && question.given ? { given: question.given, solveFor: question.find || [] }
    : Object.keys(doc.scenario).length ? { given: doc.scenario, solveFor: [] }
    : { given: example.given, solveFor: example.find };
  fillForm("pack", names, start, doc);
  if (start.solveFor && start.solveFor.length) askPack();
  else { $("pack-text").textContent = ""; $("pack-error").textContent = "tick 'solve for' beside the unknown(s)"; }
}

async function askPack() {
  if (state.view !== "pack") return; // a field left behind (its change on blur) asks nothing
  const packs = chosenPacks();
  const doc = await meta(packs);
  const names = packFields(doc);
  const q = formQuestion("pack", names, packs, []);
  writeHash("pack", q);
  const seq = ++state.seq.pack;
  const box = $("pack-answer");
  if (!q.find.length) { clearErrors("pack"); $("pack-error").textContent = "tick 'solve for' beside the unknown(s)"; return; }
  box.dataset.state = "busy";
  const answer = await post("/api/solve", q);
  if (seq !== state.seq.pack) return;
  if (answer.error) { showError("pack", answer.error); box.dataset.state = "error"; return; }
  clearErrors("pack");
  $("pack-text").textContent = answer.text;
  $("pack-why").textContent = answer.why;
  handoff("pack", answer.command, q, SOLVE_DOWNLOADS);
  box.dataset.command = answer.command;
  box.dataset.state = "done";
}

// -- the plan explorer -------------------------------------------------------------------------------------
const PLAN_FIELDS = ["model", "arrival_rate", "input_tokens", "output_tokens", "ttft_slo", "itl_slo", "utilization", "gpu_hour_price"];
const PLAN_COLUMNS = [
  ["gpu", (r) => r.gpu],
  ["tp", (r) => r.tp],
  ["w/kv", (r) => `${r.weight_dtype}/${r.kv_dtype}`],
  ["engine", (r) => r.engine],
  ["provider", (r) => r.provider],
  ["replicas", (r) => r.replicas],
  ["GPUs", (r) => r.fleet_gpus],
  ["$/GPU-h", (r) => r.gpu_hour_price && r.gpu_hour_price.value],
  ["$/month", (r) => r.cost_per_month && r.cost_per_month.value],
  ["$/M tok", (r) => r.cost_per_million_tokens && r.cost_per_million_tokens.value],
  ["TTFT ms", (r) => r.ttft && r.ttft.value],
  ["ITL ms", (r) => r.itl && r.itl.value],
  ["batch", (r) => r.batch_per_replica],
  ["binds", (r) => r.binds],
  ["reason", (r) => r.reason],
];

// A feasible row opened in the fleet page: the plan's question with the row's configuration given,
// so the fleet page shows its answer and derivation (the step's memory, compute, communication and
// fixed terms are in "why").
function fleetLink(r) {
  const given = { ...state.plan.given, gpu: r.gpu, tp: String(r.tp), weight_dtype: r.weight_dtype, kv_dtype: r.kv_dtype, engine: r.engine };
  return "#fleet?q=" + encodeURIComponent(JSON.stringify({ given, solveFor: [] }));
}

async function planView(question) {
  const doc = await meta(["llm_fleet"]);
  const form = $("plan-form");
  if (!form.dataset.built) {
    for (const name of PLAN_FIELDS) form.append(fieldRow("plan", name, doc, { find: false }));
    form.addEventListener("change", () => schedule("plan", askPlan, 0));
    for (const id of ["plan-gpu", "plan-engine", "plan-provider", "plan-dtypes", "plan-rejected"]) $(id).addEventListener("change", drawPlan);
    $("plan-filter").addEventListener("input", drawPlan);
    form.dataset.built = "1";
  }
  const start = question || { given: Object.fromEntries(PLAN_FIELDS.filter((n) => n in doc.scenario).map((n) => [n, doc.scenario[n]])) };
  fillForm("plan", PLAN_FIELDS, start, doc);
  askPlan();
}

async function askPlan() {
  if (state.view !== "plan") return; // a field left behind (its change on blur) asks nothing
  const q = formQuestion("plan", PLAN_FIELDS, [], []);
  writeHash("plan", { given: q.given });
  const seq = ++state.seq.plan;
  const box = $("plan-answer");
  box.dataset.state = "busy";
  $("status").textContent = "planning...";
  const body = { given: q.given };
  const answer = await post("/api/plan", body);
  if (seq !== state.seq.plan) return;
  $("status").textContent = "";
  if (answer.error && !answer.candidates) { showError("plan", answer.error); box.dataset.state = "error"; return; }
  clearErrors("plan");
  if (answer.error) $("plan-error").textContent = answer.error.line;
  state.plan = answer;
  state.plan.given = q.given;
  for (const [id, key] of [["plan-gpu", (r) => r.gpu], ["plan-engine", (r) => r.engine], ["plan-provider", (r) => r.provider], ["plan-dtypes", (r) => `${r.weight_dtype}/${r.kv_dtype}`]]) {
    const select = $(id);
    const keep = select.value;
    select.replaceChildren(el("option", { value: "", text: "all" }));
    for (const v of [...new Set(answer.candidates.map(key))].filter((v) => v !== null && v !== undefined && v !== "")) {
      select.append(el("option", { value: v, text: v }));
    }
    select.value = keep;
  }
  const notes = $("plan-notes");
  notes.replaceChildren(...answer.notes.map((n) => el("li", { text: "note: " + n })));
  handoff("plan", answer.command, body, [["plan.csv", "CSV"], ["plan.json", "JSON"]]);
  drawPlan();
  box.dataset.command = answer.command;
  box.dataset.state = "done";
}

function drawPlan() {
  const answer = state.plan;
  if (!answer) return;
  const gpu = $("plan-gpu").value, engine = $("plan-engine").value, dtypes = $("plan-dtypes").value;
  const provider = $("plan-provider").value;
  const text = $("plan-filter").value.trim().toLowerCase();
  const rejected = $("plan-rejected").checked;
  let rows = answer.candidates.filter((r) =>
    (r.feasible || rejected) && (!gpu || r.gpu === gpu) && (!engine || r.engine === engine) &&
    (!dtypes || `${r.weight_dtype}/${r.kv_dtype}` === dtypes) && (!provider || r.provider === provider) &&
    (!text || PLAN_COLUMNS.some(([, f]) => String(f(r) ?? "").toLowerCase().includes(text))));
  if (state.sort) {
    const [index, dir] = state.sort;
    const f = PLAN_COLUMNS[index][1];
    rows = rows.slice().sort((a, b) => {
      const x = f(a), y = f(b);
      if (x === y) return 0;
      if (x === null || x === undefined || x === "") return 1;
      if (y === null || y === undefined || y === "") return -1;
      return (x < y ? -1 : 1) * dir;
    });
  }
  const table = $("plan-table");
  const head = el("tr");
  PLAN_COLUMNS.forEach(([name], i) => {
    const mark = state.sort && state.sort[0] === i ? (state.sort[1] > 0 ? " ▲" : " ▼") : "";
    const th = el("th", { text: name + mark, "data-column": name, class: "sortable" });
    th.addEventListener("click", () => {
      state.sort = state.sort && state.sort[0] === i ? [i, -state.sort[1]] : [i, 1];
      drawPlan();
    });
    head.append(th);
  });
  const body = rows.map((r, n) => {
    const tr = el("tr", { id: `plan-row-${n}`, class: r.feasible ? "feasible" : "rejected" });
    for (const [name, f] of PLAN_COLUMNS) {
      const v = f(r);
      tr.append(el("td", { "data-column": name, text: v === null || v === undefined ? "-" : typeof v === "number" && !Number.isInteger(v) ? round6(v).toLocaleString("en-US") : String(v) }));
    }
    tr.append(el("td", {}, r.feasible ? el("a", { href: fleetLink(r), title: "open this configuration in the fleet page", text: "open" }) : ""));
    tr.dataset.row = answer.candidates.indexOf(r);
    return tr;
  });
  head.append(el("th", { text: "" }));
  table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
  drawChart(answer, new Set(rows.map((r) => answer.candidates.indexOf(r))));
  const feasible = answer.candidates.filter((r) => r.feasible).length;
  $("plan-count").textContent = `${rows.length} shown; ${feasible} feasible, ${answer.candidates.length - feasible} rejected`;
}

// The Pareto chart of `concur plan --plot`: output tokens/s per GPU against tokens/s per user (1 / ITL) of the
// rows shown; the front joined; hovering a point names its row, clicking it marks the row in the table.
// the SVG namespace, as the HTML parser assigns it (no address is written in this file)
const SVG = new DOMParser().parseFromString("<svg></svg>", "text/html").querySelector("svg").namespaceURI;
function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

function ticks(max) {
  const step0 = max / 5;
  const mag = 10 ** Math.floor(Math.log10(step0 || 1));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= step0) || step0;
  const out = [];
  for (let v = 0; v <= max * 1.0001; v += step) out.push(v);
  return out;
}

function drawChart(answer, shown) {
  const box = $("plan-chart");
  const points = answer.pareto.filter((p) => shown.has(p.row));
  if (!points.length) { box.replaceChildren(); return; }
  const W = 760, H = 320, L = 70, R = 20, T = 16, B = 46;
  const xmax = Math.max(...points.map((p) => p.per_user)) * 1.05;
  const ymax = Math.max(...points.map((p) => p.per_gpu)) * 1.05;
  const x = (v) => L + (v / xmax) * (W - L - R);
  const y = (v) => H - B - (v / ymax) * (H - T - B);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", id: "plan-chart-svg" });
  chart.append(svg("title", {}, "output tokens/s per GPU against tokens/s per user"));
  for (const v of ticks(xmax)) {
    chart.append(svg("line", { x1: x(v), x2: x(v), y1: T, y2: H - B, class: "grid" }));
    chart.append(svg("text", { x: x(v), y: H - B + 16, "text-anchor": "middle", class: "tick" }, round6(v).toLocaleString("en-US")));
  }
  for (const v of ticks(ymax)) {
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    chart.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, round6(v).toLocaleString("en-US")));
  }
  chart.append(svg("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", class: "axis" }, "tokens/s per user (1 / ITL) [token/s]"));
  chart.append(svg("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis", transform: `rotate(-90 14 ${(T + H - B) / 2})` }, "output tokens/s per GPU [token/s]"));
  const front = points.filter((p) => p.front).sort((a, b) => a.per_user - b.per_user);
  if (front.length > 1) chart.append(svg("polyline", { points: front.map((p) => `${x(p.per_user)},${y(p.per_gpu)}`).join(" "), class: "front" }));
  for (const p of points) {
    const r = answer.candidates[p.row];
    const dot = svg("circle", { cx: x(p.per_user), cy: y(p.per_gpu), r: p.front ? 4 : 3, class: p.front ? "dot front-dot" : "dot", "data-row": p.row });
    const cost = r.cost_per_month ? `, $${Math.round(r.cost_per_month.value).toLocaleString("en-US")}/month` : "";
    dot.append(svg("title", {}, `${r.gpu} tp${r.tp} ${r.weight_dtype}/${r.kv_dtype} ${r.engine}: ${round6(p.per_user)} token/s per user, ${round6(p.per_gpu)} token/s per GPU, ${r.replicas} replicas${cost}`));
    dot.addEventListener("click", () => markRow(p.row));
    chart.append(dot);
  }
  box.replaceChildren(chart, el("figcaption", { text: `${points.length} feasible configurations shown; the Pareto front joined (hover a point for its row, click to mark it)` }));
}

function markRow(index) {
  for (const tr of document.querySelectorAll("#plan-table tr.marked")) tr.classList.remove("marked");
  const tr = document.querySelector(`#plan-table tr[data-row="${index}"]`);
  if (tr) { tr.classList.add("marked"); tr.scrollIntoView({ block: "center" }); }
}

// -- curves ------------------------------------------------------------------------------------------------
// The CLI's T2 question to start from: the throughput curve of Llama-3.1-8B on H100, 1,024 in / 2,048 out.
const CURVE_START = {
  packs: ["llm_throughput"],
  given: { model: "llama-3.1-8b", gpu: "h100-sxm-80gb", input_tokens: "1024", output_tokens: "2048" },
  find: ["tokens_per_s_per_gpu", "tokens_per_s_per_user"],
  over: "concurrency=1..256:64",
  log: true,
};

async function curveView(question) {
  const all = await meta(["llm_fleet"]);
  const select = $("curve-pack");
  if (!select.dataset.built) {
    for (const name of Object.keys(all.packs)) select.append(el("option", { value: name, text: name }));
    select.addEventListener("change", () => buildCurve({ packs: [select.value], given: null, find: [], over: $("curve-over").value, log: $("curve-log").checked }));
    $("curve-over").addEventListener("change", () => schedule("curve", askCurve, 0));
    $("curve-log").addEventListener("change", () => schedule("curve", askCurve, 0));
    select.dataset.built = "1";
  }
  const q = question && question.packs ? question : CURVE_START;
  select.value = q.packs[0];
  $("curve-over").value = q.over || "";
  $("curve-log").checked = !!q.log;
  await buildCurve(q);
}

async function buildCurve(question) {
  const packs = [$("curve-pack").value];
  const doc = await meta(packs);
  if (doc.error) { $("curve-error").textContent = doc.error.line; return; }
  const form = $("curve-form");
  form.replaceChildren();
  const names = packFields(doc);
  for (const name of names) form.append(fieldRow("curve", name, doc, { find: true }));
  form.oninput = () => schedule("curve", askCurve, 400);
  form.onchange = () => schedule("curve", askCurve, 0);
  fillForm("curve", names, { given: question.given || {}, solveFor: question.find || [] }, doc);
  askCurve();
}

async function askCurve() {
  if (state.view !== "curve") return;
  const packs = [$("curve-pack").value];
  const doc = await meta(packs);
  const q = formQuestion("curve", packFields(doc), packs, []);
  q.over = $("curve-over").value.trim();
  q.log = $("curve-log").checked;
  writeHash("curve", q);
  const box = $("curve-answer");
  const seq = ++state.seq.curve;
  clearErrors("curve");
  $("curve-error-over").textContent = "";
  if (!q.find.length) { $("curve-error").textContent = "tick 'solve for' beside the variable(s) to draw"; return; }
  box.dataset.state = "busy";
  const answer = await post("/api/curve", q);
  if (seq !== state.seq.curve) return;
  if (answer.error) {
    // an error about the sweep itself (its range, its variable, --log) goes beside the sweep field
    const over = q.over.split("=")[0].trim();
    const line = answer.error.line || "";
    const aboutOver = !answer.error.field && (line.includes("'over'") || line.includes("--log") || (over && line.includes(over)));
    if (aboutOver) { clearErrors("curve"); $("curve-error-over").textContent = line; }
    else showError("curve", answer.error);
    box.dataset.state = "error";
    return;
  }
  const charts = $("curve-charts");
  charts.replaceChildren(...answer.series.map((s) => lineChart(answer.x, s)));
  $("curve-notes").replaceChildren(...answer.notes.map((n) => el("li", { text: "note: " + n })));
  handoff("curve", answer.command, q, []);
  box.dataset.command = answer.command;
  box.dataset.state = "done";
}

function axisLabel(v) {
  return v.unit ? `${v.name} [${v.unit}]` : v.name;
}

// One panel: `series` against `x`, a gap where a point has no answer (null), every axis with its unit.
function lineChart(x, series) {
  const W = 560, H = 260, L = 70, R = 16, T = 12, B = 44;
  const pts = x.values.map((v, i) => [v, series.values[i]]);
  const ok = pts.filter(([, y]) => y !== null);
  const figure = el("figure", { class: "chart", id: `curve-chart-${series.name}` });
  if (!ok.length) { figure.append(el("figcaption", { text: `${series.name}: no point has an answer` })); return figure; }
  const xmax = Math.max(...x.values) * 1.02, ymax = Math.max(...ok.map(([, y]) => y)) * 1.05 || 1;
  const sx = (v) => L + (v / xmax) * (W - L - R);
  const sy = (v) => H - B - (v / ymax) * (H - T - B);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" });
  chart.append(svg("title", {}, `${series.name} against ${x.name}`));
  for (const v of ticks(xmax)) {
    chart.append(svg("line", { x1: sx(v), x2: sx(v), y1: T, y2: H - B, class: "grid" }));
    chart.append(svg("text", { x: sx(v), y: H - B + 16, "text-anchor": "middle", class: "tick" }, round6(v).toLocaleString("en-US")));
  }
  for (const v of ticks(ymax)) {
    chart.append(svg("line", { x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: "grid" }));
    chart.append(svg("text", { x: L - 6, y: sy(v) + 4, "text-anchor": "end", class: "tick" }, round6(v).toLocaleString("en-US")));
  }
  chart.append(svg("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", class: "axis" }, axisLabel(x)));
  chart.append(svg("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis", transform: `rotate(-90 14 ${(T + H - B) / 2})` }, axisLabel(series)));
  let run = [];
  const flush = () => { if (run.length > 1) chart.append(svg("polyline", { points: run.join(" "), class: "front" })); run = []; };
  pts.forEach(([a, b], i) => {
    if (b === null) { flush(); return; }
    run.push(`${sx(a)},${sy(b)}`);
    const dot = svg("circle", { cx: sx(a), cy: sy(b), r: 2.5, class: "dot front-dot", "data-index": i });
    dot.append(svg("title", {}, `${x.name} = ${round6(a)} ${x.unit}: ${series.name} = ${round6(b)} ${series.unit}`));
    chart.append(dot);
  });
  flush();
  figure.append(chart, el("figcaption", { text: `${axisLabel(series)} against ${axisLabel(x)}` }));
  return figure;
}

// -- views -------------------------------------------------------------------------------------------------
async function show() {
  const { view, question } = readHash();
  state.view = view;
  for (const name of ["fleet", "pack", "plan", "curve"]) {
    $(`view-${name}`).hidden = name !== view;
    $(`nav-${name}`).classList.toggle("current", name === view);
  }
  if (view === "fleet") await fleetView(question);
  else if (view === "pack") await packView(question);
  else if (view === "plan") await planView(question);
  else await curveView(question);
}

window.addEventListener("hashchange", () => { if (readHash().view !== state.view) show(); });
document.addEventListener("DOMContentLoaded", show);

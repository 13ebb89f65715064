/*
 * The load test's report.html: draws the document inlined in #report-data (report.json, each
 * run's partition series left out) side by side, a column per run: its figures, its heat map
 * (console.js's renderer, fed the run's recorded heat_history once), write rate, lag and latency
 * per second as inline SVG, advice, growths, warnings and the gate's verdicts.
 *
 * Every chart of one kind shares its scale across the runs, so the columns compare at a glance
 * (as the heat maps do: one colour scale, topped at the shard capacity). A figure the run did
 * not measure reads "–" and a second without a value is a gap, never 0. No request leaves the
 * page: it is one file, opened from disk.
 *
 * Rejected: a chart library (the report must open offline, from one file, years later) and
 * canvas charts (SVG keeps the numbers as text a person can select and zoom).
 */
(function () {
  "use strict";

  const HEAT = window.DayshardHeat;
  const SVG = "http://www.w3.org/2000/svg";
  const CHART_W = 300, CHART_H = 120, PAD_L = 44, PAD_B = 16, PAD_T = 6, PAD_R = 6;
  const COLOURS = ["#6cb6ff", "#4fd18b", "#f5b942", "#ff5d5d", "#c58cff"];
  const HEAT_WINDOW_MIN_S = 10;
  const HEAT_WINDOW_MAX_S = 300;

  const doc = JSON.parse(document.getElementById("report-data").textContent);
  const runs = doc.runs || [];
  const num = HEAT.num;

  function node(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  function fixed(x, digits, unit) {
    if (x == null || typeof x !== "number" || !isFinite(x)) return "–";
    return x.toLocaleString("en-US", { maximumFractionDigits: digits }) + (unit || "");
  }

  /* ---- the setup ---------------------------------------------------------------------------- */

  function setup() {
    const m = doc.machine || {};
    const items = [["profile", doc.profile], ["events", num(doc.events)],
                   ["rate", num(doc.rate) + "/s"], ["nodes", doc.nodes],
                   ["capacity per shard", num(doc.shard_capacity_eps) + "/s"],
                   ["started", doc.started], ["machine", (m.cores || "?") + " cores, " + (m.cpu || "")]];
    const box = document.getElementById("setup");
    for (const [label, value] of items) {
      const s = node("div", "stat");
      s.appendChild(node("span", "label", label));
      s.appendChild(node("span", "value", value == null ? "–" : String(value)));
      box.appendChild(s);
    }
    document.getElementById("command").textContent = doc.command || "";
  }

  /* ---- figures ------------------------------------------------------------------------------- */

  const FIGURES = [
    ["events stored / s", "events_per_s", (v) => fixed(v, 0)],
    ["over capacity", "over_capacity_seconds", (v) => fixed(v, 0, " partition-s")],
    ["would throttle", "would_throttle_events", (v) => fixed(v, 0, " events")],
    ["hottest partition", "hot_partition_capacity_factor", (v) => fixed(v, 2, "x capacity")],
    ["hottest share (max)", "hottest_share_max", (v) => (v == null ? "–" : fixed(v * 100, 1, "%"))],
    ["lag p99", "lag_p99_ms", (v) => fixed(v, 0, " ms")],
    ["durable p99", "durable_p99_ms", (v) => fixed(v, 1, " ms")],
    ["day count p99", "count_p99_us", (v) => (v == null ? "–" : fixed(v / 1000, 2, " ms"))],
    ["growths", "growths", (v) => fixed(v, 0)],
    ["final shards (max)", "final_shards_max", (v) => fixed(v, 0)],
  ];

  function figures(run) {
    const table = node("table", "grid figures");
    const tbody = node("tbody");
    const sum = run.summary || {};
    for (const [label, key, format] of FIGURES) {
      const tr = node("tr");
      tr.appendChild(node("td", null, label));
      const td = node("td", "num", format(sum[key]));
      if (key === "over_capacity_seconds" && sum[key] > 0) td.classList.add("over");
      tr.appendChild(td);
      tbody.appendChild(tr);
    }
    table.appendChild(tbody);
    return table;
  }

  /* ---- the heat map -------------------------------------------------------------------------- */

  /* The run's recorded history drawn by the console's renderer; its window spans the history
   * (at least 10 s, so a short run is not a sliver at the right edge). */
  function heatMap(run, column) {
    const h = run.heat_history;
    const map = node("div", "map report-map");
    const heat = node("canvas", "heat"), overlay = node("canvas", "overlay");
    const tooltip = node("div", "tooltip"), empty = node("div", "map-empty",
      h ? "no writes in the recorded history" : "no heat history in this report (an older dayshard)");
    tooltip.hidden = true;
    map.append(heat, overlay, tooltip, empty);
    column.appendChild(map);
    const cols = (h && h.columns) || [];
    let windowS = HEAT_WINDOW_MIN_S;
    if (cols.length > 0) {
      windowS = Math.min(HEAT_WINDOW_MAX_S,
                         Math.max(HEAT_WINDOW_MIN_S, cols[cols.length - 1].t - cols[0].t + 1));
    }
    const r = HEAT.create({ map: map, heat: heat, overlay: overlay, tooltip: tooltip, empty: empty },
                          { windowS: windowS, capacity: doc.shard_capacity_eps });
    r.resize();
    /* The window ends at the last second written: the nodes' own second may be a few idle
     * seconds later (the history is read after the run's final count). */
    if (h) r.takeHistory(cols.length > 0 ? Object.assign({}, h, { second: cols[cols.length - 1].t }) : h);
    r.draw(0);
    if (!map.dataset.cells) map.dataset.cells = "0";
    const legend = node("div", "legend");
    const ramp = node("span", "ramp");
    ramp.style.background = HEAT.rampCss;
    legend.append(node("span", null, "0"), ramp,
                  node("span", null, num(doc.shard_capacity_eps) + "/s"),
                  node("span", "swatch over"), node("span", null, "over capacity"),
                  node("span", "swatch growth"), node("span", null, "growth"));
    column.appendChild(legend);
  }

  /* ---- charts -------------------------------------------------------------------------------- */

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    return e;
  }

  function values(run, key, scale) {
    const a = ((run.series || {})[key]) || [];
    return a.map((v) => (typeof v === "number" && isFinite(v) ? v * scale : null));
  }

  /* The largest value of a chart's lines over every run: one scale for the whole row. */
  function chartMax(spec) {
    let max = 0;
    for (const run of runs) {
      for (const [key, , scale] of spec.lines) {
        for (const v of values(run, key, scale)) if (v != null && v > max) max = v;
      }
    }
    return max > 0 ? max * 1.05 : 1;
  }

  function tickText(v, unit) {
    if (v >= 10000) return num(v / 1000) + "k";
    return fixed(v, v < 10 ? 1 : 0) + (unit || "");
  }

  /* One chart: a line per series (a gap where a second has no value), shared yMax. */
  function chart(run, spec, yMax) {
    const box = node("div", "chart");
    box.appendChild(node("h3", null, spec.title));
    const t = ((run.series || {}).t_s) || [];
    const tMax = Math.max(1, t.length > 0 ? t[t.length - 1] : 1);
    const w = CHART_W - PAD_L - PAD_R, h = CHART_H - PAD_T - PAD_B;
    const root = svg("svg", { viewBox: "0 0 " + CHART_W + " " + CHART_H, class: "line-chart",
                              role: "img", "aria-label": spec.title });
    const x = (s) => PAD_L + (s / tMax) * w;
    const y = (v) => PAD_T + h - Math.min(1, v / yMax) * h;
    for (const f of [0, 0.5, 1]) {
      root.appendChild(svg("line", { x1: PAD_L, x2: PAD_L + w, y1: y(yMax * f), y2: y(yMax * f),
                                     class: "grid-line" }));
      root.appendChild(svg("text", { x: PAD_L - 4, y: y(yMax * f) + 3, class: "tick end" },
                           tickText(yMax * f, spec.unit)));
    }
    root.appendChild(svg("text", { x: PAD_L, y: CHART_H - 3, class: "tick" }, "0 s"));
    root.appendChild(svg("text", { x: PAD_L + w, y: CHART_H - 3, class: "tick end" },
                         fixed(tMax, 0, " s")));
    const legend = node("div", "chart-legend");
    spec.lines.forEach(([key, label, scale], i) => {
      const v = values(run, key, scale);
      let d = "", pen = false;
      for (let k = 0; k < v.length && k < t.length; k++) {
        if (v[k] == null) { pen = false; continue; }
        d += (pen ? "L" : "M") + x(t[k]).toFixed(1) + " " + y(v[k]).toFixed(1);
        pen = true;
      }
      if (d) root.appendChild(svg("path", { d: d, stroke: COLOURS[i % COLOURS.length], class: "line" }));
      const item = node("span", null, label);
      item.style.borderColor = COLOURS[i % COLOURS.length];
      legend.appendChild(item);
    });
    box.append(root, legend);
    return box;
  }

  const CHARTS = [
    { title: "write rate (events/s)", lines: [["produced_eps", "produced", 1],
                                              ["stored_eps", "stored", 1]] },
    { title: "lag (ms)", unit: "", lines: [["lag_ms", "lag in time", 1]] },
    { title: "latency p99 (ms)", lines: [["durable_p99_ms", "durable", 1],
                                         ["queryable_p99_ms", "queryable", 1],
                                         ["count_p99_us", "day count", 0.001],
                                         ["orders_p99_us", "newest 10", 0.001]] },
  ];

  /* ---- lists --------------------------------------------------------------------------------- */

  function list(title, items, cls) {
    const box = node("div", "notes " + (cls || ""));
    box.appendChild(node("h3", null, title));
    for (const text of items) box.appendChild(node("div", "row", text));
    return box;
  }

  function verdicts(index) {
    const gate = doc.gate;
    if (!gate || !Array.isArray(gate.verdicts)) return null;
    const mine = gate.verdicts.filter((v) => v.run === index + 1);
    if (mine.length === 0) return null;
    const box = node("div", "notes gate");
    box.appendChild(node("h3", null, "gate"));
    for (const v of mine) {
      const row = node("div", "row verdict " + v.state, v.state + ": " + v.expr + " (" +
                       (v.value == null ? "not measured" : fixed(v.value, 3)) + ")");
      box.appendChild(row);
    }
    return box;
  }

  /* The run's column, appended to box first: the heat map sizes itself from its place. */
  function column(box, run, index, maxes) {
    const col = node("section", "panel run");
    box.appendChild(col);
    col.dataset.strategy = run.strategy || "";
    col.appendChild(node("h2", null, "run " + (index + 1) + " · " + (run.strategy || "?")));
    col.appendChild(figures(run));
    heatMap(run, col);
    CHARTS.forEach((spec, i) => col.appendChild(chart(run, spec, maxes[i])));
    const advice = (run.advice || []).map((a) => a.case.replace(/_/g, " ") + ": " + a.subject +
                                          ". " + a.evidence + " " + a.remedy);
    if (advice.length > 0) col.appendChild(list("more shards cannot help", advice, "advice"));
    const growths = (run.growths || []).map((g) => g.day + ": " + g.from + "→" + g.to + " at " +
                                            fixed(g.at_s, 1, " s") + " (" + g.reason + ")");
    if (growths.length > 0) col.appendChild(list("growths", growths.slice(0, 12).concat(
      growths.length > 12 ? ["… and " + (growths.length - 12) + " more"] : []), "growths"));
    if ((run.warnings || []).length > 0) col.appendChild(list("warnings", run.warnings, "warnings"));
    const gate = verdicts(index);
    if (gate) col.appendChild(gate);
  }

  setup();
  const box = document.getElementById("runs");
  box.style.gridTemplateColumns = "repeat(" + Math.max(1, runs.length) + ", minmax(260px, 1fr))";
  const maxes = CHARTS.map(chartMax);
  runs.forEach((run, i) => column(box, run, i, maxes));
  if (runs.length === 0) box.appendChild(node("p", "lead", "This report has no runs."));
  document.body.dataset.runs = String(runs.length);
  document.body.dataset.ready = "1";
})();

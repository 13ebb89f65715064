/*
 * The dayshard console: one EventSource on /v1/heat/stream (its first frame carries 300 s of
 * history, each later one the seconds since), drawn on a canvas. Vanilla JS, no fetch outside
 * this server (its Content-Security-Policy forbids any).
 *
 * The heat map is a renderer of its own, window.DayshardHeat.create(elements, options): the live
 * page makes one and feeds it stream frames; the load test's report.html inlines this same file
 * and makes one per run, fed the run's recorded history once, so a run in the report looks
 * exactly as it did live. The live page below starts only where its #live element exists.
 *
 * A heat map keeps a ring of its window's seconds (300 live) per partition key (day -> shard ->
 * Uint32Array) and a layout of "lines": each visible key (or run of keys sharing a pixel row,
 * or a collapsed day) gets one line of at least 1 px, drawn with the hottest of its keys. A new
 * second shifts the canvas left by one column and paints only the new column (one fillRect per
 * non-empty line); a full repaint (one ImageData, one putImageData) happens only when the
 * layout changes (zoom, a new day, a growth, a resize), and leaves the number of cells it
 * painted in the map element's data-cells.
 * Growths, axes and labels live on a second canvas above, redrawn whole each second (a few
 * hundred strokes at most). No DOM node per cell.
 *
 * Where there is no heat (`dayshard serve`: /v1/heat answers 404 or 501), the page says so and
 * polls /v1/count?by=day every 2 s instead.
 *
 * Rejected: a second renderer for the report (two drawings of the same data drift apart, and
 * the report is where a person compares what the console showed).
 */
(function () {
  "use strict";

  const WINDOW_S = 300;
  const GUTTER_PX = 112;     /* day labels, left of the plot */
  const AXIS_PX = 22;        /* time labels, below the plot */
  const TOP_PX = 6;
  const DAY_GAP_PX = 4;
  const ZOOM_MAX = 64;
  const COUNTS_POLL_MS = 2000;
  const RETRY_MS = 2000;
  const OVER = "#ff5d5d";
  const BAND = "#1a1f27";
  const GROWTH = "#f5b942";

  /* ---- colour -------------------------------------------------------------------------------- */

  /* 0 .. capacity over a dark-to-bright ramp (blue, teal, green, yellow, white-ish): a full cell is
   * the brightest colour; anything over capacity is red, never on the ramp. */
  const STOPS = [[0.00, 24, 48, 92], [0.25, 28, 104, 160], [0.50, 32, 168, 150],
                 [0.75, 150, 210, 80], [1.00, 255, 236, 140]];
  const RAMP = [];
  const RAMP32 = new Uint32Array(256);  /* the same, as ImageData pixels (RGBA in memory) */
  const pixel = (r, g, b) => ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
  for (let i = 0; i < 256; i++) {
    const x = i / 255;
    let j = 1;
    while (j < STOPS.length - 1 && STOPS[j][0] < x) j++;
    const a = STOPS[j - 1], b = STOPS[j];
    const f = (x - a[0]) / (b[0] - a[0]);
    const c = [1, 2, 3].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
    RAMP.push("rgb(" + c.join(",") + ")");
    RAMP32[i] = pixel(c[0], c[1], c[2]);
  }
  const OVER32 = pixel(255, 93, 93), BAND32 = pixel(26, 31, 39), BG32 = pixel(15, 17, 21);
  /* The legend's ramp, as a CSS background. */
  const RAMP_CSS = "linear-gradient(to right," +
    [0, 64, 128, 192, 255].map((i) => RAMP[i]).join(",") + ")";

  function colour(events, capacity) {
    if (events > capacity) return OVER;
    const i = Math.max(1, Math.min(255, Math.round((events / capacity) * 255)));
    return RAMP[i];
  }

  /* ---- formatting ---------------------------------------------------------------------------- */

  const nf = new Intl.NumberFormat("en-US");
  function num(x) { return x == null ? "–" : nf.format(Math.round(x)); }
  function pct(x) { return x == null ? "–" : (x * 100).toFixed(x < 0.1 ? 1 : 0) + "%"; }
  function hms(t) { return new Date(t * 1000).toISOString().slice(11, 19); }
  function dayOfKey(d) { return "DAY#" + d; }


  /* ---- the heat map ------------------------------------------------------------------------- */

  /* A heat map drawn into el: {map, heat, overlay, tooltip, empty} (map holds the two canvases,
   * the tooltip and the empty note, and gives the size). opts: windowS (seconds across, default
   * 300), capacity (events/s a shard takes, the colour scale's top; default 1000). */
  function createHeatMap(el, opts) {
    opts = opts || {};
    const W = Math.max(2, Math.round(opts.windowS || WINDOW_S));
    const tick = W > 150 ? 60 : W > 40 ? 15 : 5;   /* seconds between time-axis ticks */
    const state = {
      second: null,        /* last heat second in the history (epoch s) */
      capacity: opts.capacity || 1000,
      days: new Map(),     /* day -> {rows: [Uint32Array(W)], shards, last, collapsed} */
      growths: [],         /* {t, day, from, to, at, reason} in the window */
      amended: [],         /* seconds a frame re-took, for draw() to repaint */
      zoom: 1,
      scroll: 0,           /* device px of the zoomed content above the view */
      lines: [],           /* layout: {day, from, to, y, h} in device px of the plot */
      bands: [],           /* layout: {day, y, h} per day (for labels, ticks and clicks) */
      layoutDirty: true,
      dpr: 1,
      colW: 1, plotW: 0,   /* the heat canvas: whole device pixels per column, stretched to fit */
      plotH: 0,            /* device px, both canvases */
      oPlotW: 0,           /* the plot's width on the overlay, device px */
    };

    function dayEntry(day) {
      let d = state.days.get(day);
      if (!d) {
        d = { rows: [], shards: 0, last: 0, collapsed: false };
        state.days.set(day, d);
        state.layoutDirty = true;
      }
      return d;
    }

    function ensureShards(d, n) {
      while (d.rows.length < n) d.rows.push(new Uint32Array(W));
      if (n > d.shards) {
        d.shards = n;
        state.layoutDirty = true;
      }
    }

    function slot(t) { return ((t % W) + W) % W; }

    function resetHistory() {
      state.amended = [];
      state.days.clear();
      state.growths = [];
      state.second = null;
      state.layoutDirty = true;
    }

    /* Takes one frame's history: clears the slots of the seconds it moves past, fills its columns.
     * A column of a second already taken (a node amended it: an event of that second read late)
     * replaces that second's slot whole and is remembered for draw() to repaint. */
    function takeHistory(h) {
      if (h.shard_capacity_eps > 0) state.capacity = h.shard_capacity_eps;
      if (h.second == null) return 0;
      const prev = state.second;
      const next = h.second;
      let moved = prev == null ? W : next - prev;
      if (moved < 0) {              /* the clock went back (another node, a restart): start over */
        resetHistory();
        moved = W;
      }
      const clear = Math.min(moved, W);
      for (const d of state.days.values()) {
        for (const row of d.rows) {
          for (let i = 0; i < clear; i++) row[slot(next - i)] = 0;
        }
      }
      state.second = next;
      for (const col of h.columns || []) {
        if (col.t <= next - W || col.t > next) continue;
        const s = slot(col.t);
        if (prev != null && col.t <= prev && moved < W) {
          for (const d of state.days.values()) {
            for (const row of d.rows) row[s] = 0;
          }
          if (!state.amended.includes(col.t)) state.amended.push(col.t);
        }
        for (const day in col.days) {
          const counts = col.days[day];
          const d = dayEntry(day);
          ensureShards(d, counts.length);
          for (let k = 0; k < counts.length; k++) d.rows[k][s] = counts[k];
          if (col.t > d.last) d.last = col.t;
        }
      }
      for (const g of h.growths || []) {
        const d = dayEntry(g.day);
        ensureShards(d, g.to);
        if (g.t > d.last) d.last = g.t;
        if (!state.growths.some((o) => o.t === g.t && o.day === g.day && o.to === g.to)) {
          state.growths.push(g);
        }
      }
      state.growths = state.growths.filter((g) => g.t > next - W);
      for (const [day, d] of state.days) {
        if (d.last <= next - W) {   /* nothing left of it in the window */
          state.days.delete(day);
          state.layoutDirty = true;
        }
      }
      return Math.min(moved, W);
    }

    /* The shard counts /v1/heat knows (its top days and partitions) grow the rows too. */
    function takeShardCounts(heat) {
      for (const dd of heat.days || []) {
        const d = state.days.get(dd.day);
        if (d) ensureShards(d, dd.shards);
      }
    }

    /* ---- layout -------------------------------------------------------------------------------- */

    function sortedDays() {
      return Array.from(state.days.keys()).sort().reverse();  /* newest day on top */
    }

    /* The heat canvas covers the plot only, with a whole number of device pixels per second
     * (so a shift moves whole columns) and CSS stretches it to the plot's width; the overlay
     * covers the whole map at device resolution, for crisp text. */
    function resize() {
      const dpr = window.devicePixelRatio || 1;
      const w = el.map.clientWidth, h = el.map.clientHeight;
      const cssPlotW = Math.max(W / dpr, w - GUTTER_PX - 10);
      const cssPlotH = Math.max(10, h - AXIS_PX - TOP_PX);
      state.dpr = dpr;
      el.overlay.width = Math.max(1, Math.round(w * dpr));
      el.overlay.height = Math.max(1, Math.round(h * dpr));
      state.oPlotW = Math.round(cssPlotW * dpr);
      state.plotH = Math.round(cssPlotH * dpr);
      state.colW = Math.max(1, Math.ceil(state.oPlotW / W));
      state.plotW = state.colW * W;
      el.heat.width = state.plotW;
      el.heat.height = state.plotH;
      Object.assign(el.heat.style, { left: GUTTER_PX + "px", top: TOP_PX + "px",
                                     width: cssPlotW + "px", height: cssPlotH + "px" });
      state.layoutDirty = true;
    }

    /* The plot on the overlay (device px). */
    function plotX() { return Math.round(GUTTER_PX * state.dpr); }
    function plotY() { return Math.round(TOP_PX * state.dpr); }
    /* Left edge of second t on the overlay. */
    function overlayX(t) {
      return plotX() + (W - 1 - (state.second - t)) * (state.oPlotW / W);
    }

    /* Lines and bands of the zoomed view, in device pixels relative to the plot's top. */
    function layout() {
      const days = sortedDays();
      const gap = Math.round(DAY_GAP_PX * state.dpr);
      const total = state.plotH * state.zoom;
      let weight = 0;
      for (const day of days) {
        const d = state.days.get(day);
        weight += d.collapsed ? 1 : Math.max(1, d.shards);
      }
      const rowH = weight > 0 ? Math.max(0.01, (total - gap * Math.max(0, days.length - 1)) / weight) : 1;
      state.scroll = Math.max(0, Math.min(state.scroll, total - state.plotH));
      const lines = [], bands = [];
      let y = -state.scroll;
      for (const day of days) {
        const d = state.days.get(day);
        const n = d.collapsed ? 1 : Math.max(1, d.shards);
        const top = y, bottom = y + n * rowH;
        bands.push({ day: day, y: Math.floor(top), h: Math.max(1, Math.floor(bottom) - Math.floor(top)) });
        for (let k = 0; k < n; k++) {
          const y0 = Math.floor(top + k * rowH), y1 = Math.floor(top + (k + 1) * rowH);
          if (y1 < 0 || y0 >= state.plotH) continue;
          const from = d.collapsed ? 0 : k, to = d.collapsed ? Math.max(1, d.shards) : k + 1;
          const last = lines[lines.length - 1];
          if (last && last.day === day && last.y === y0) {
            last.to = to;                              /* keys sharing a pixel row: one line */
            last.h = Math.max(last.h, y1 - y0);
          } else {
            lines.push({ day: day, from: from, to: to, y: y0, h: Math.max(1, y1 - y0) });
          }
        }
        y = bottom + gap;
      }
      state.lines = lines;
      state.bands = bands;
      state.layoutDirty = false;
    }

    /* ---- drawing ------------------------------------------------------------------------------- */

    function lineValue(line, s) {
      const d = state.days.get(line.day);
      let v = 0;
      for (let k = line.from; k < line.to && k < d.rows.length; k++) {
        if (d.rows[k][s] > v) v = d.rows[k][s];
      }
      return v;
    }

    /* Paints columns for the seconds t0..t1 (inclusive) at their place in the window. */
    function paintColumns(ctx, t0, t1) {
      const px = 0, py = 0, cw = state.colW;
      const x0 = px + state.plotW - (state.second - t0 + 1) * cw;
      const w = (t1 - t0 + 1) * cw;
      ctx.fillStyle = "#0f1115";
      ctx.fillRect(x0, py, w, state.plotH);
      ctx.fillStyle = BAND;
      for (const b of state.bands) {
        const y0 = Math.max(0, b.y), y1 = Math.min(state.plotH, b.y + b.h);
        if (y1 > y0) ctx.fillRect(x0, py + y0, w, y1 - y0);
      }
      for (let t = t0; t <= t1; t++) {
        const s = slot(t), x = px + state.plotW - (state.second - t + 1) * cw;
        for (const line of state.lines) {
          const v = lineValue(line, s);
          if (v === 0) continue;
          ctx.fillStyle = colour(v, state.capacity);
          ctx.fillRect(x, py + line.y, cw, line.h);
        }
      }
    }

    function colour32(events, capacity) {
      if (events > capacity) return OVER32;
      return RAMP32[Math.max(1, Math.min(255, Math.round((events / capacity) * 255)))];
    }

    /* The whole window into one ImageData: a fillRect per cell costs ~0.4 s at 7,168 keys. */
    function repaintAll() {
      const ctx = el.heat.getContext("2d");
      const W = state.plotW, H = state.plotH, cw = state.colW;
      const img = ctx.createImageData(W, H);
      const px = new Uint32Array(img.data.buffer);
      px.fill(BG32);
      for (const b of state.bands) {
        const y0 = Math.max(0, b.y), y1 = Math.min(H, b.y + b.h);
        if (y1 > y0) px.fill(BAND32, y0 * W, y1 * W);
      }
      let painted = 0;
      if (state.second != null) {
        const first = state.second - W + 1;
        for (const line of state.lines) {
          const y0 = Math.max(0, line.y), y1 = Math.min(H, line.y + line.h);
          for (let c = 0; c < W && y1 > y0; c++) {
            const v = lineValue(line, slot(first + c));
            if (v === 0) continue;
            const colour = colour32(v, state.capacity);
            painted++;
            for (let y = y0; y < y1; y++) px.fill(colour, y * W + c * cw, y * W + (c + 1) * cw);
          }
        }
      }
      ctx.putImageData(img, 0, 0);
      el.map.dataset.cells = String(painted);  /* for a person's devtools and the tests */
    }

    /* One new second or a few: shift the plot left, paint only the new columns. */
    function paintNew(moved) {
      const ctx = el.heat.getContext("2d");
      const px = 0, py = 0, shift = moved * state.colW;
      ctx.drawImage(el.heat, px + shift, py, state.plotW - shift, state.plotH,
                    px, py, state.plotW - shift, state.plotH);
      paintColumns(ctx, state.second - moved + 1, state.second);
    }

    /* Repaints the amended seconds still in the window (after any shift, so at their place). */
    function paintAmended() {
      const ctx = el.heat.getContext("2d");
      for (const t of state.amended) {
        if (state.second != null && t > state.second - W) paintColumns(ctx, t, t);
      }
    }

    function draw(moved) {
      if (state.layoutDirty) {
        layout();
        repaintAll();
      } else if (moved >= W) {
        repaintAll();
      } else {
        if (moved > 0) paintNew(moved);
        paintAmended();
      }
      state.amended = [];
      drawOverlay();
      el.empty.hidden = state.days.size > 0;
    }

    function drawOverlay() {
      const ctx = el.overlay.getContext("2d");
      const dpr = state.dpr;
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.clearRect(0, 0, el.overlay.width, el.overlay.height);
      if (state.second == null) return;
      const px = plotX(), py = plotY();
      ctx.font = Math.round(11 * dpr) + "px system-ui, 'DejaVu Sans', sans-serif";
      ctx.textBaseline = "top";
      /* day labels, one per band, skipped when they would overlap the previous one */
      let lastLabel = -1e9;
      for (const b of state.bands) {
        if (b.y + b.h < 0 || b.y >= state.plotH) continue;
        const y = py + Math.max(0, b.y);
        if (y - lastLabel < 13 * dpr) continue;
        const d = state.days.get(b.day);
        ctx.fillStyle = "#c4cad4";
        ctx.textAlign = "left";
        ctx.fillText((d.collapsed ? "▸ " : "▾ ") + b.day, 4 * dpr, y);
        if (b.h >= 26 * dpr) {
          ctx.fillStyle = "#8b94a3";
          ctx.fillText(d.shards + (d.shards === 1 ? " shard" : " shards"), 16 * dpr, y + 13 * dpr);
        }
        lastLabel = y;
      }
      /* time axis: a tick a minute (closer on a short window), the last second at the right */
      ctx.strokeStyle = "rgba(139,148,163,0.28)";
      ctx.fillStyle = "#8b94a3";
      ctx.textAlign = "center";
      const axisY = py + state.plotH + 4 * dpr;
      for (let t = state.second - W + 1; t <= state.second; t++) {
        if (t % tick !== 0) continue;
        const x = Math.round(overlayX(t));
        ctx.beginPath();
        ctx.moveTo(x + 0.5, py);
        ctx.lineTo(x + 0.5, py + state.plotH + 3 * dpr);
        ctx.stroke();
        if (px + state.oPlotW - x > 100 * dpr) ctx.fillText(hms(t), x, axisY);
      }
      ctx.textAlign = "right";
      ctx.fillText(hms(state.second) + " UTC", px + state.oPlotW, axisY);
      /* growths: a tick across the day's band at its second, labelled from->to */
      ctx.textAlign = "left";
      for (const g of state.growths) {
        const band = state.bands.find((b) => b.day === g.day);
        if (!band) continue;
        const x = Math.round(overlayX(g.t) + state.oPlotW / W / 2);
        const y0 = py + Math.max(0, band.y), y1 = py + Math.min(state.plotH, band.y + band.h);
        if (y1 <= y0) continue;
        ctx.fillStyle = GROWTH;
        ctx.fillRect(x - Math.max(1, Math.round(dpr)), y0, Math.max(2, Math.round(2 * dpr)), y1 - y0);
        const label = g.from + "→" + g.to;
        const tw = ctx.measureText(label).width;
        const lx = Math.min(x + 3 * dpr, px + state.oPlotW - tw - 2 * dpr);
        ctx.fillStyle = "rgba(15,17,21,0.85)";
        ctx.fillRect(lx - 2 * dpr, y0 + 1 * dpr, tw + 4 * dpr, 13 * dpr);
        ctx.fillStyle = GROWTH;
        ctx.fillText(label, lx, y0 + 2 * dpr);
      }
    }

    /* ---- interaction --------------------------------------------------------------------------- */

    function hit(ev) {
      const r = el.overlay.getBoundingClientRect();
      const x = (ev.clientX - r.left) * state.dpr, y = (ev.clientY - r.top) * state.dpr;
      return { x: x, y: y, cssX: ev.clientX - r.left, cssY: ev.clientY - r.top };
    }

    function bandAt(y) {
      const rel = y - plotY();
      return state.bands.find((b) => rel >= b.y && rel < b.y + b.h + DAY_GAP_PX * state.dpr) || null;
    }

    function showTooltip(ev) {
      const p = hit(ev);
      const px = plotX(), py = plotY();
      if (state.second == null || p.x < px || p.x >= px + state.oPlotW || p.y < py ||
          p.y >= py + state.plotH) {
        el.tooltip.hidden = true;
        return;
      }
      const col = Math.min(W - 1, Math.floor((p.x - px) / (state.oPlotW / W)));
      const t = state.second - (W - 1 - col);
      const rel = p.y - py;
      const line = state.lines.find((l) => rel >= l.y && rel < l.y + l.h);
      const band = bandAt(p.y);
      const parts = [];
      if (line) {
        const d = state.days.get(line.day);
        const s = slot(t);
        let v = 0, hot = line.from;
        for (let k = line.from; k < line.to && k < d.rows.length; k++) {
          if (d.rows[k][s] > v) { v = d.rows[k][s]; hot = k; }
        }
        const key = dayOfKey(line.day) + "#" + (line.to - line.from > 1 ? hot : line.from);
        parts.push(["k", key + (line.to - line.from > 1 ? "  (hottest of shards " + line.from + "–" + (line.to - 1) + ")" : "")]);
        parts.push(["", hms(t) + " UTC  ·  " + num(v) + " events  ·  " + pct(v / state.capacity) + " of capacity"]);
      }
      const day = line ? line.day : band ? band.day : null;
      for (const g of state.growths) {
        if (g.day !== day || Math.abs(g.t - t) > Math.max(1, Math.ceil(4 * W / state.oPlotW))) continue;
        parts.push(["g", "growth " + g.from + "→" + g.to + " at " + (g.at || hms(g.t)) + ": " + g.reason]);
      }
      if (parts.length === 0) {
        el.tooltip.hidden = true;
        return;
      }
      el.tooltip.replaceChildren(...parts.map(([cls, text]) => {
        const div = document.createElement("div");
        if (cls) div.className = cls;
        div.textContent = text;
        return div;
      }));
      el.tooltip.hidden = false;
      const w = el.map.clientWidth;
      const left = p.cssX + 14 + 300 > w ? p.cssX - 14 - el.tooltip.offsetWidth : p.cssX + 14;
      el.tooltip.style.left = Math.max(0, left) + "px";
      el.tooltip.style.top = (p.cssY + 14) + "px";
    }

    function zoomAt(factor, yDevice) {
      const old = state.zoom;
      state.zoom = Math.max(1, Math.min(ZOOM_MAX, state.zoom * factor));
      const anchor = (yDevice != null ? yDevice - plotY() : state.plotH / 2);
      state.scroll = (state.scroll + anchor) * (state.zoom / old) - anchor;
      state.layoutDirty = true;
      draw(0);
    }

    el.overlay.addEventListener("mousemove", showTooltip);
    el.overlay.addEventListener("mouseleave", () => { el.tooltip.hidden = true; });
    el.overlay.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      if (ev.shiftKey) {
        state.scroll += (ev.deltaY || ev.deltaX) * state.dpr;
        state.layoutDirty = true;
        draw(0);
        return;
      }
      zoomAt(ev.deltaY < 0 ? 1.25 : 0.8, hit(ev).y);
    }, { passive: false });
    el.overlay.addEventListener("click", (ev) => {
      const p = hit(ev);
      if (p.x >= plotX()) return;
      const band = bandAt(p.y);
      if (!band) return;
      const d = state.days.get(band.day);
      d.collapsed = !d.collapsed;
      state.layoutDirty = true;
      draw(0);
    });
    function fit() {
      state.zoom = 1;
      state.scroll = 0;
      state.layoutDirty = true;
      draw(0);
    }
    function collapseAll(c) {
      for (const d of state.days.values()) d.collapsed = c;
      state.layoutDirty = true;
      draw(0);
    }

    return {
      takeHistory: takeHistory, takeShardCounts: takeShardCounts, reset: resetHistory,
      draw: draw, resize: resize, zoom: (f) => zoomAt(f, null), fit: fit,
      collapseAll: collapseAll,
      capacity: () => state.capacity,
      setCapacity: (c) => { if (c > 0) state.capacity = c; },
    };
  }

  window.DayshardHeat = { create: createHeatMap, rampCss: RAMP_CSS, num: num, pct: pct };

  /* ---- the live page ------------------------------------------------------------------------- */

  const $ = (id) => document.getElementById(id);
  if (!$("live")) return;   /* another page (report.html) that uses the renderer only */
  const el = {
    status: $("status"), frames: $("frames"), second: $("heat-second"), rate: $("rate-now"),
    capacity: $("capacity"), kind: $("server-kind"),
    hotKey: $("hottest-key"), hotRate: $("hottest-rate"), hotShare: $("hottest-share"),
    partitions: $("partitions"), customers: $("customers"), kafka: $("kafka"), counts: $("counts"),
    advicePanel: $("advice-panel"), advice: $("advice"), legendCap: $("legend-cap"),
  };
  const heatMap = createHeatMap({ map: $("map"), heat: $("heat"), overlay: $("overlay"),
                               tooltip: $("tooltip"), empty: $("map-empty") });
  let frames = 0;
  $("legend-ramp").style.background = RAMP_CSS;
  $("zoom-in").addEventListener("click", () => heatMap.zoom(1.5));
  $("zoom-out").addEventListener("click", () => heatMap.zoom(1 / 1.5));
  $("zoom-fit").addEventListener("click", () => heatMap.fit());
  $("collapse-all").addEventListener("click", () => heatMap.collapseAll(true));
  $("expand-all").addEventListener("click", () => heatMap.collapseAll(false));
  window.addEventListener("resize", () => { heatMap.resize(); heatMap.draw(0); });

  /* ---- text panels --------------------------------------------------------------------------- */

  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c.cls) td.className = c.cls;
      if (c.bar != null) {
        const fill = document.createElement("div");
        fill.className = "fill";
        fill.style.width = Math.max(0, Math.min(100, c.bar * 100)).toFixed(1) + "%";
        td.appendChild(fill);
      } else {
        td.textContent = c.text;
      }
      if (c.title) td.title = c.title;
      tr.appendChild(td);
    }
    return tr;
  }

  function fill(tbody, rows, emptyText, columns) {
    if (rows.length === 0) {
      tbody.replaceChildren(row([{ text: emptyText, cls: "empty" }]));
      tbody.firstChild.firstChild.colSpan = columns;
      return;
    }
    tbody.replaceChildren(...rows);
  }

  function customerText(id) { return typeof id === "string" ? JSON.stringify(id) : String(id); }

  function showHeat(heat, counts) {
    const parts = heat.partitions || [];
    const top = parts[0];
    el.hotKey.textContent = top ? top.key : "–";
    el.hotRate.textContent = top ? num(top.rate_now) : "–";
    el.hotShare.textContent = top ? pct(top.share) + " of writes" : "";
    el.second.textContent = heat.second || "–";
    el.rate.textContent = heat.rate_now != null ? num(heat.rate_now) + "/s" : "–";
    heatMap.setCapacity(heat.shard_capacity_eps);
    el.capacity.textContent = num(heatMap.capacity()) + "/s";
    el.legendCap.textContent = num(heatMap.capacity()) + "/s (capacity)";
    fill(el.partitions, parts.slice(0, 10).map((p) => {
      const tr = row([{ text: p.key, cls: "key", title: p.key },
        { text: num(p.rate_now), cls: "num" + (p.rate_now > heatMap.capacity() ? " over" : "") },
        { text: pct(p.share), cls: "num" }, { text: String(p.day_shards), cls: "num" }]);
      return tr;
    }), "no writes in the last seconds", 4);
    fill(el.customers, (heat.customers || []).map((c) => row([
      { text: customerText(c.customer_id), cls: "key", title: customerText(c.customer_id) },
      { text: num(c.rate_eps) + " ± " + num(c.error_eps), cls: "num" },
      { text: pct(c.share), cls: "num" }])), "none yet", 3);
    fill(el.kafka, (heat.kafka_partitions || []).map((k) => row([
      { text: String(k.partition), cls: "num" }, { text: num(k.rate_now), cls: "num" },
      { text: k.lag == null ? "–" : num(k.lag), cls: "num" }])), "none assigned", 3);
    showCounts(el.counts, counts || [], false);
    const advice = heat.advice || [];
    el.advicePanel.hidden = advice.length === 0;
    el.advice.replaceChildren(...advice.map((a) => {
      const div = document.createElement("div");
      div.className = "row";
      for (const [cls, text] of [["case", a.case.replace(/_/g, " ") + (a.subject ? ": " + a.subject : "")],
                                 ["evidence", a.evidence], ["remedy", a.remedy]]) {
        const p = document.createElement("div");
        p.className = cls;
        p.textContent = text;
        div.appendChild(p);
      }
      return div;
    }));
  }

  /* Day counts, newest first, with a bar relative to the largest. */
  function showCounts(tbody, counts, amounts) {
    const sorted = counts.slice().sort((a, b) => (a.day < b.day ? 1 : -1)).slice(0, 31);
    const max = sorted.reduce((m, c) => Math.max(m, c.count), 0);
    fill(tbody, sorted.map((c) => {
      const cells = [{ text: c.day }, { text: num(c.count), cls: "num" }];
      if (amounts) cells.push({ text: c.amount_sum || "", cls: "num" });
      cells.push({ bar: max > 0 ? c.count / max : 0, cls: "bar" });
      return row(cells);
    }), "no stored events", amounts ? 4 : 3);
  }

  /* ---- the stream ---------------------------------------------------------------------------- */

  function setStatus(text, cls) {
    el.status.textContent = text;
    el.status.className = "status " + cls;
  }

  let source = null;
  function connect() {
    let first = true;
    source = new EventSource("/v1/heat/stream");
    source.addEventListener("open", () => {
      first = true;               /* every connection's first frame carries the whole window */
      setStatus("connected", "status-wait");
    });
    source.addEventListener("heat", (ev) => {
      let frame;
      try {
        frame = JSON.parse(ev.data);
      } catch (e) {
        setStatus("bad frame: " + e.message, "status-bad");
        return;
      }
      if (first) {              /* a (re)connection: its first frame carries the whole window */
        heatMap.reset();
        first = false;
      }
      frames++;
      el.frames.textContent = String(frames);
      const t0 = performance.now();
      const moved = frame.history ? heatMap.takeHistory(frame.history) : 0;
      if (frame.heat) {
        heatMap.takeShardCounts(frame.heat);
        showHeat(frame.heat, frame.counts);
      }
      heatMap.draw(moved);
      /* what a frame costs, for a person (the tooltip of #frames) and a test */
      const ms = performance.now() - t0;
      document.body.dataset.frameMs = ms.toFixed(1);
      el.frames.title = "last frame handled in " + ms.toFixed(1) + " ms";
      setStatus("live", "status-live");
    });
    source.addEventListener("error", () => {
      setStatus("disconnected, retrying", "status-bad");
      if (source.readyState === EventSource.CLOSED) {   /* a refusal (503, 404): retry ourselves */
        source.close();
        setTimeout(connect, RETRY_MS);
      }
    });
  }

  /* ---- serve: no heat ------------------------------------------------------------------------ */

  function isoDay(ms) { return new Date(ms).toISOString().slice(0, 10); }

  let countSpanDays = 366;
  async function pollCounts() {
    const now = Date.now();
    const from = isoDay(now - (countSpanDays - 2) * 86400000);
    const to = isoDay(now + 86400000);   /* a day ahead: producers' clocks run ahead of ours */
    try {
      const r = await fetch("/v1/count?day=" + from + "&to=" + to + "&by=day", { cache: "no-store" });
      if (r.status === 400 && countSpanDays > 31) {    /* a server with a shorter range limit */
        countSpanDays = 31;
        return pollCounts();
      }
      const doc = await r.json();
      if (!r.ok) throw new Error(doc.error || ("HTTP " + r.status));
      const groups = (doc.groups || []).filter((g) => g.count > 0)
        .map((g) => ({ day: g.key, count: g.count, amount_sum: g.amount_sum }));
      showCounts($("serve-counts"), groups, true);
      $("serve-note").textContent = "the newest 31 days with events between " + from + " and " + to +
        "; total " + num(doc.count) + " events";
      setStatus("live", "status-live");
      frames++;
      el.frames.textContent = String(frames);
    } catch (e) {
      setStatus("disconnected, retrying", "status-bad");
    }
  }

  function serveMode() {
    $("live").hidden = true;
    $("no-heat").hidden = false;
    el.kind.textContent = "serve";
    el.second.textContent = "no heat";
    pollCounts();
    setInterval(pollCounts, COUNTS_POLL_MS);
  }

  /* /v1/heat says which server this is: 404 or 501 means no heat (serve). */
  async function start() {
    heatMap.resize();
    heatMap.draw(0);
    let status = 0;
    try {
      const r = await fetch("/v1/heat?top=1", { cache: "no-store" });
      status = r.status;
      if (r.ok) {
        const doc = await r.json();
        el.kind.textContent = doc.nodes ? "router" : "node";
      }
    } catch (e) {
      status = 0;
    }
    if (status === 404 || status === 501) {
      serveMode();
      return;
    }
    if (status === 401) {
      setStatus("token needed: open /?token=…", "status-bad");
      return;
    }
    if (!el.kind.textContent) el.kind.textContent = "node";
    connect();
  }

  start();
})();

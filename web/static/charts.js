// Plotly figures of the dashboard: runs' points, fitted sigmoids, dotted extrapolations and forecast bands.
// Bands are plain `scatter` traces with fill='tonexty' (fill does not work on scattergl).
"use strict";

const Charts = (() => {
  // Colours follow the page's colour scheme (dark mode: prefers-color-scheme).
  const DARK = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  const FONT = { family: "system-ui, -apple-system, Segoe UI, Roboto, Helvetica Neue, Arial, sans-serif",
    size: 12, color: DARK ? "#dfe5ee" : "#1c2330" };
  const GRID = DARK ? "#2a3240" : "#eceff3";
  const BG = DARK ? "#171c25" : "#fff";
  const AXIS = DARK ? "#3a4352" : "#c8ced8";
  // No "Share chart…" (it posts the figure to Plotly's cloud, which the page's CSP blocks anyway) and no links out.
  const CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
    showLink: false, showTips: false, plotlyServerURL: "",
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines", "sendDataToCloud"] };

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }

  // Axis titles are plain text (escaped here: they carry compute units and metric names).
  // `uirevision` keeps the user's zoom, pan and hidden legend entries across live redraws (Plotly.react with new
  // data): a chart keeps one value for its life unless the user asks for another view (e.g. a new axis).
  // `zeroLabel` names the lane of points at x = 0 on a log axis (its legend entry); `emptyRange` is the y range of
  // a chart with no data yet (default: the metric's own, from the y title: a pass rate is 0–1).
  function layout({ xTitle, yTitle, logX = true, height, legend = true, budget = null, yRange = null,
    uirevision = "keep", zeroLabel = "at compute 0", emptyRange = undefined }) {
    const shapes = [];
    const annotations = [];
    if (budget) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: budget, x1: budget, y0: 0, y1: 1,
        line: { color: "#9aa3b0", width: 1, dash: "dash" } });
      annotations.push({ x: logX ? Math.log10(budget) : budget, xref: "x", y: 1, yref: "paper", text: "budget",
        showarrow: false, xanchor: "right", yanchor: "top", font: { size: 11, color: "#5f6b7a" } });
    }
    // The top margin holds the mode bar, so it never covers the first legend entry. Log axes get explicit ticks
    // (draw(): 1-2-5 steps or denser, each labelled with its full value), since Plotly's own log ticks print bare
    // digits ("2 3 5") or, on some ranges, no label at all.
    return {
      scalerl: { zeroLabel, emptyRange: emptyRange === undefined ? metricRange(yTitle) : emptyRange },
      font: FONT, height, margin: { l: 56, r: 16, t: 34, b: 46 }, paper_bgcolor: BG, plot_bgcolor: BG,
      hovermode: "closest", showlegend: legend, shapes, annotations, uirevision,
      legend: { orientation: "v", x: 1.01, y: 1, xanchor: "left", yanchor: "top", font: { size: 11.5 },
        itemclick: "toggle" },
      modebar: { orientation: "h", bgcolor: "rgba(0,0,0,0)", color: DARK ? "#7d8898" : undefined },
      xaxis: { type: logX ? "log" : "linear", title: { text: esc(xTitle) }, gridcolor: GRID, zeroline: false,
        exponentformat: "SI", linecolor: AXIS,
        // Hover values as plain decimals ("0.00512", "8,000"), like the ticks: SI prefixes read as units
        // ("5.12m gpu_hours" is not 5 minutes).
        ...(logX ? { hoverformat: ",.3~r" } : {}) },
      // No `range: null`: with uirevision, Plotly restores a zoom into `yaxis.range[0]` and fails on a null range.
      yaxis: { title: { text: esc(yTitle) }, gridcolor: GRID, zeroline: false, linecolor: AXIS,
        ...(yRange ? { range: yRange } : {}) },
    };
  }

  // Traces of one highlighted run, in drawing order: band (lo, hi filled to it), fitted, extrapolation, points.
  function runTraces(run, color, unit) {
    const group = `run-${run.id}`;
    const out = [];
    if (run.band) {
      out.push({ type: "scatter", mode: "lines", x: run.band.x, y: run.band.lo, line: { width: 0, color },
        hoverinfo: "skip", showlegend: false, legendgroup: group, uid: `${group}-lo` });
      out.push({ type: "scatter", mode: "lines", x: run.band.x, y: run.band.hi, line: { width: 0, color },
        fill: "tonexty", fillcolor: rgba(color, 0.14), hoverinfo: "skip", showlegend: false, legendgroup: group,
        name: `${esc(run.name)} band`, uid: `${group}-hi` });
    }
    if (run.fitted) {
      out.push({ type: "scatter", mode: "lines", x: run.fitted.x, y: run.fitted.y, line: { color, width: 2 },
        name: `${esc(run.name)} fit`, hovertemplate: `${esc(run.name)} fit<br>%{x:,.3~r} ${esc(unit)}<br>%{y:.3f}<extra></extra>`,
        showlegend: false, legendgroup: group, uid: `${group}-fit` });
    }
    if (run.extrapolation) {
      out.push({ type: "scatter", mode: "lines", x: run.extrapolation.x, y: run.extrapolation.y,
        line: { color, width: 2, dash: "dot" }, name: `${esc(run.name)} forecast`, showlegend: false, legendgroup: group,
        uid: `${group}-ext`,
        hovertemplate: `${esc(run.name)} forecast${run.forecast ? ` (${esc(run.forecast)})` : ""}<br>%{x:,.3~r} `
          + `${esc(unit)}<br>%{y:.3f}<extra></extra>` });
    }
    // Points at compute 0 (the first evaluation, before any training) cannot sit on a log axis: draw() puts them
    // in a marked lane at the left edge ("at compute 0"). Points in the burn-in (left out of the fit) are open circles.
    const px = [], py = [], bx = [], by = [], first = [];
    const burn = run.burn_in || 0;
    run.points.x.forEach((x, i) => {
      const y = run.points.y[i];
      if (x <= 0) first.push(y);
      else if (x < burn) { bx.push(x); by.push(y); } else { px.push(x); py.push(y); }
    });
    out.push({ type: "scatter", mode: "markers", x: px, y: py, name: legendName(run.name), uid: `${group}-points`,
      marker: { color, size: 5, opacity: 0.85 }, legendgroup: group,
      hovertemplate: `${esc(run.name)}<br>%{x:,.3~r} ${esc(unit)}<br>pass rate %{y:.3f}<extra></extra>` });
    if (bx.length) {
      out.push({ type: "scatter", mode: "markers", x: bx, y: by, name: `${esc(run.name)} burn-in`, showlegend: false,
        uid: `${group}-burn`, legendgroup: group, marker: { color, size: 6, symbol: "circle-open" },
        hovertemplate: `${esc(run.name)}<br>%{x:,.3~r} ${esc(unit)}<br>pass rate %{y:.3f}`
          + "<br>burn-in: left out of the fit<extra></extra>" });
    }
    if (first.length) {
      out.push(zeroTrace(first, color, `${group}-first`, run.name,
        `${esc(run.name)}<br>first evaluation (compute 0, before training)<br>pass rate %{y:.3f}<extra></extra>`));
    }
    return out;
  }

  // Every other run as three grey traces (points, fits, extrapolations), so 200 runs stay light.
  function backgroundTraces(runs) {
    if (!runs.length) return [];
    const join = (key) => {
      const x = [], y = [];
      for (const r of runs) {
        const s = r[key];
        if (!s || !s.x.length) continue;
        x.push(...s.x, null);
        y.push(...s.y, null);
      }
      return { x, y };
    };
    const pts = join("points"), fit = join("fitted"), ext = join("extrapolation");
    const name = `other runs (${runs.length})`;
    // Their evaluations at compute 0 go to the lane too (draw()), as one grey trace.
    const zero = pts.y.filter((y, i) => pts.x[i] !== null && pts.x[i] <= 0);
    const keep = pts.x.map((x) => x === null || x > 0);
    pts.x = pts.x.filter((_, i) => keep[i]);
    pts.y = pts.y.filter((_, i) => keep[i]);
    const lane = zero.length ? [{ ...zeroTrace(zero, "#aab2be", "others-first", name,
      "other run<br>evaluation at compute 0<br>pass rate %{y:.3f}<extra></extra>"),
    marker: { color: "#aab2be", size: 5, opacity: 0.6, symbol: "diamond-open" } }] : [];
    return [...lane,
      { type: "scatter", mode: "lines", ...fit, line: { color: "#b5bcc7", width: 1 }, hoverinfo: "skip",
        legendgroup: "others", showlegend: false, connectgaps: false },
      { type: "scatter", mode: "lines", ...ext, line: { color: "#b5bcc7", width: 1, dash: "dot" },
        hoverinfo: "skip", legendgroup: "others", showlegend: false, connectgaps: false },
      { type: "scatter", mode: "markers", ...pts, name, marker: { color: "#aab2be", size: 3, opacity: 0.45 },
        hoverinfo: "skip", legendgroup: "others", uid: "others-points" },
    ];
  }

  // Plotly renders a subset of HTML (<b>, <a href>, <span style>, <br>) in trace names (legend), axis titles,
  // annotations and hover labels, and substitutes %{...} in hover templates: every user text that reaches Plotly
  // (run names, compute units, metric names, recipe values) goes through esc(). Plotly decodes only a few named
  // entities (&lt; &gt; &amp;, not &quot;) but every numeric one, so quotes and braces are numeric entities.
  function esc(text) {
    return String(text).replace(/[&<>"'{}]/g, (c) => `&#${c.charCodeAt(0)};`);
  }

  // A legend entry: the name escaped and, when long, cut in the middle (its end says the seed), so that a run named
  // after long grid values does not squeeze the plot to nothing; the hover label keeps the whole name.
  function legendName(text, max = 64) {
    const chars = Array.from(String(text));
    if (chars.length <= max) return esc(text);
    const tail = Math.floor(max / 3);
    return esc(chars.slice(0, max - tail - 1).join("") + "…" + chars.slice(-tail).join(""));
  }

  // A series' points at x = 0 (compute 0, step 0, time 0): markers that draw() places in the lane at the left edge
  // of a log axis (on a linear axis they stay at 0). They share one legend entry ("at compute 0"), which hides or
  // shows them all; a run's own legend entry hides its curve, not its point in the lane.
  function zeroTrace(y, color, uid, name, hovertemplate) {
    return { type: "scatter", mode: "markers", x: y.map(() => 0), y, uid, name: `${esc(name)} at 0`,
      showlegend: false, legendgroup: "zero-lane", zeroLane: true, hovertemplate,
      marker: { color, size: 8, symbol: "diamond-open", line: { width: 1.5, color } } };
  }

  // The y range of a chart with no data yet: the metric's own (rates and pass rates are 0–1), never Plotly's
  // empty default (−1 to 4).
  function metricRange(title) {
    const t = String(title || "").toLowerCase();
    if (!t) return null;
    return [0, 1];  // pass rate, rates, accuracies; an unknown metric with no data gets 0–1 too
  }

  // Tick labels of a log axis: the full value ("0.005", "20", "1500", "20k"), never a bare digit.
  function tickText(v) {
    const a = Math.abs(v);
    if (a >= 1e4) {
      const [d, unit] = a >= 1e12 ? [1e12, "T"] : a >= 1e9 ? [1e9, "G"] : a >= 1e6 ? [1e6, "M"] : [1e3, "k"];
      return `${Number((v / d).toPrecision(4))}${unit}`;
    }
    if (a >= 1e-4 || a === 0) return String(Number(v.toPrecision(6)));
    const e = Math.floor(Math.log10(a));
    return `${Number((v / 10 ** e).toPrecision(4))}e${e}`;
  }

  // Ticks for a log axis over [lo, hi] (data units) on `width` pixels: the densest of 1-2-…-9, 1-2-5, 1-3, 1 per
  // decade (then every 2nd, 3rd … decade) whose labels do not overlap; a range too short for two of those gets
  // evenly spaced ticks. Never fewer than two labels when the range is valid.
  function logTicks(lo, hi, width) {
    if (!(lo > 0) || !(hi > lo) || !(width > 0)) return [];
    const a = Math.log10(lo), b = Math.log10(hi);
    const px = (v) => ((Math.log10(v) - a) / (b - a)) * width;
    const fits = (vals) => vals.every((v, i) => i === 0
      || px(v) - px(vals[i - 1]) >= (tickText(v).length + tickText(vals[i - 1]).length) * 3.6 + 10);
    const build = (mants, every = 1) => {
      const out = [];
      for (let e = Math.floor(a); e <= Math.ceil(b); e++) {
        if (e % every !== 0) continue;
        for (const m of mants) {
          const v = Number((m * 10 ** e).toPrecision(12));
          if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push(v);
        }
      }
      return out;
    };
    const sets = [[1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 5], [1, 3], [1]];
    for (const m of sets) {
      const vals = build(m);
      if (vals.length >= 2 && fits(vals)) return vals;
      if (vals.length < 2 && m.length === 9) break;  // too short a range for digit steps: even steps below
    }
    for (let every = 2; every <= 40; every++) {
      const vals = build([1], every);
      if (vals.length >= 2 && fits(vals)) return vals;
      if (vals.length < 2) break;
    }
    // A short range (or very wide labels): evenly spaced, nicely rounded values.
    for (const n of [5, 4, 3, 2]) {
      const raw = (hi - lo) / n;
      const p = 10 ** Math.floor(Math.log10(raw));
      const step = [1, 2, 2.5, 5, 10].map((k) => k * p).find((k) => k >= raw) || raw;
      const vals = [];
      for (let v = Math.ceil(lo / step) * step; v <= hi * (1 + 1e-9); v += step) vals.push(Number(v.toPrecision(10)));
      if (vals.length >= 2 && fits(vals)) return vals;
    }
    // The ends, rounded to 3 digits inward (rounding 1.995e-5 up to 2e-5 would put a tick outside the range).
    const inward = (v, up) => {
      const p = 10 ** (Math.floor(Math.log10(v)) - 2);
      return Number(((up ? Math.ceil(v / p - 1e-9) : Math.floor(v / p + 1e-9)) * p).toPrecision(3));
    };
    return [inward(lo, true), inward(hi, false)];
  }

  const nodeOf = (node) => (typeof node === "string" ? document.getElementById(node) : node);
  const finite = (v) => v !== null && v !== undefined && Number.isFinite(Number(v));

  // The lane of x = 0 points at the left edge of a log axis, in log10 units: [left, right] and its centre, placed
  // a gap to the left of the smallest positive x of the chart (its data, the budget line).
  function lanePlace(traces, lay) {
    let lo = Infinity, hi = -Infinity;  // a loop, not Math.min(...xs): a chart may carry 20,000 points
    const see = (x) => { if (finite(x) && x > 0) { lo = Math.min(lo, Number(x)); hi = Math.max(hi, Number(x)); } };
    for (const t of traces) if (!t.zeroLane) for (const x of t.x || []) see(x);
    for (const sh of lay.shapes || []) if (sh.xref === "x") see(sh.x0);
    if (!Number.isFinite(lo)) { lo = 1; hi = 10; }
    if (hi <= lo) lo = hi / 100;
    const span = Math.max(Math.log10(hi) - Math.log10(lo), 0.5);
    const width = 0.07 * span, gap = 0.05 * span;
    const right = Math.log10(lo) - gap;
    return { left: right - width, right, centre: right - width / 2, width, first: Math.log10(lo) };
  }

  // Everything draw() adds to a log-x figure: the lane (x = 0 points moved into it, a shaded band, a "0" tick and
  // a legend entry), then ticks for the axis range.
  function placeLane(traces, lay) {
    const lane = traces.filter((t) => t.zeroLane && t.visible !== false);
    if (!lane.length) return null;
    const place = lanePlace(traces, lay);
    lane.forEach((t, k) => {
      const off = lane.length > 1 ? (k / (lane.length - 1) - 0.5) * place.width * 0.6 : 0;
      t.x = t.y.map(() => 10 ** (place.centre + off));
    });
    const label = (lay.scalerl && lay.scalerl.zeroLabel) || "at compute 0";
    traces.push({ type: "scatter", mode: "markers", x: [null], y: [null], name: esc(label), uid: "zero-lane-key",
      legendgroup: "zero-lane", showlegend: true, hoverinfo: "skip",
      marker: { color: "#8a93a0", size: 8, symbol: "diamond-open", line: { width: 1.5, color: "#8a93a0" } } });
    lay.shapes = [...(lay.shapes || []), { type: "rect", xref: "x", yref: "paper", x0: 10 ** place.left,
      x1: 10 ** place.right, y0: 0, y1: 1, layer: "below", line: { width: 0 },
      fillcolor: DARK ? "rgba(255,255,255,0.06)" : "rgba(28,35,48,0.05)" },
    { type: "line", xref: "x", yref: "paper", x0: 10 ** place.right, x1: 10 ** place.right, y0: 0, y1: 1,
      layer: "below", line: { color: AXIS, width: 1, dash: "dot" } }];
    lay.annotations = [...(lay.annotations || []), { x: place.centre, xref: "x", y: 0.5, yref: "paper",
      text: esc(label), textangle: -90, showarrow: false, font: { size: 10.5, color: DARK ? "#8f9aab" : "#6b7685" } }];
    return place;
  }

  // Explicit ticks for the axis' current range (after autorange, a zoom or a live redraw), the lane's "0" included.
  function retick(gd) {
    const full = gd && gd._fullLayout && gd._fullLayout.xaxis;
    if (!full || full.type !== "log" || !full.range) return null;
    const lane = gd._scalerlLane;
    let [a, b] = full.range;
    const width = (gd._fullLayout._size && gd._fullLayout._size.w) || 600;
    const firstAt = lane ? Math.max(a, lane.right + (lane.first - lane.right) * 0.5) : a;
    const vals = logTicks(10 ** firstAt, 10 ** b, width * (b - firstAt) / (b - a));
    const tickvals = [...vals], ticktext = vals.map(tickText);
    if (lane && lane.centre >= a && lane.centre <= b) { tickvals.unshift(10 ** lane.centre); ticktext.unshift("0"); }
    return { tickvals, ticktext };
  }
  function applyTicks(gd) {
    const t = retick(gd);
    if (!t) return Promise.resolve();
    const cur = gd.layout.xaxis || {};
    if (JSON.stringify(cur.tickvals) === JSON.stringify(t.tickvals)
      && JSON.stringify(cur.ticktext) === JSON.stringify(t.ticktext)) return Promise.resolve();
    return Plotly.relayout(gd, { "xaxis.tickmode": "array", "xaxis.tickvals": t.tickvals, "xaxis.ticktext": t.ticktext });
  }

  function draw(node, traces, lay) {
    const gd = nodeOf(node);
    traces = traces.map((t) => ({ ...t }));
    lay = { ...lay };
    const logX = lay.xaxis && lay.xaxis.type === "log";
    // A chart with no data gets the metric's own y range (a pass rate 0–1), not Plotly's −1 to 4.
    const hasY = traces.some((t) => (t.y || []).some(finite));
    const empty = lay.scalerl && lay.scalerl.emptyRange;
    if (!hasY && empty && !(lay.yaxis && lay.yaxis.range)) {
      lay.yaxis = { ...lay.yaxis, range: empty, autorange: false };
    }
    if (logX) {
      gd._scalerlLane = placeLane(traces, lay);
      // Keep the ticks of the last draw until applyTicks() has the new range (no flash of Plotly's own).
      const prev = gd.layout && gd.layout.xaxis;
      if (prev && prev.tickmode === "array") {
        lay.xaxis = { ...lay.xaxis, tickmode: "array", tickvals: prev.tickvals, ticktext: prev.ticktext };
      }
    }
    for (const t of traces) delete t.zeroLane;
    return Plotly.react(gd, traces, lay, CONFIG).then(() => {
      if (!logX) return undefined;
      if (!gd._scalerlTicks) {  // zoom, pan, autoscale: new ticks for the new range
        gd._scalerlTicks = true;
        gd.on("plotly_relayout", (ev) => {
          if (Object.keys(ev || {}).some((k) => k.startsWith("xaxis.range") || k === "xaxis.autorange")) applyTicks(gd);
        });
      }
      return applyTicks(gd);
    });
  }

  return { layout, runTraces, backgroundTraces, draw, rgba, esc, legendName, zeroTrace, logTicks, tickText,
    metricRange };
})();

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
  function layout({ xTitle, yTitle, logX = true, height, legend = true, budget = null, yRange = null,
    uirevision = "keep" }) {
    const shapes = [];
    const annotations = [];
    if (budget) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: budget, x1: budget, y0: 0, y1: 1,
        line: { color: "#9aa3b0", width: 1, dash: "dash" } });
      annotations.push({ x: logX ? Math.log10(budget) : budget, xref: "x", y: 1, yref: "paper", text: "budget",
        showarrow: false, xanchor: "right", yanchor: "top", font: { size: 11, color: "#5f6b7a" } });
    }
    // The top margin holds the mode bar, so it never covers the first legend entry. Log axes keep Plotly's own
    // ticks: a fixed dtick ("D2") left a range shorter than a decade with no labels at all.
    return {
      font: FONT, height, margin: { l: 56, r: 16, t: 34, b: 46 }, paper_bgcolor: BG, plot_bgcolor: BG,
      hovermode: "closest", showlegend: legend, shapes, annotations, uirevision,
      legend: { orientation: "v", x: 1.01, y: 1, xanchor: "left", yanchor: "top", font: { size: 11.5 },
        itemclick: "toggle" },
      modebar: { orientation: "h", bgcolor: "rgba(0,0,0,0)", color: DARK ? "#7d8898" : undefined },
      xaxis: { type: logX ? "log" : "linear", title: { text: esc(xTitle) }, gridcolor: GRID, zeroline: false,
        exponentformat: "SI", linecolor: AXIS },
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
        name: `${esc(run.name)} fit`, hovertemplate: `${esc(run.name)} fit<br>%{x:.3s} ${esc(unit)}<br>%{y:.3f}<extra></extra>`,
        showlegend: false, legendgroup: group, uid: `${group}-fit` });
    }
    if (run.extrapolation) {
      out.push({ type: "scatter", mode: "lines", x: run.extrapolation.x, y: run.extrapolation.y,
        line: { color, width: 2, dash: "dot" }, name: `${esc(run.name)} forecast`, showlegend: false, legendgroup: group,
        uid: `${group}-ext`,
        hovertemplate: `${esc(run.name)} forecast<br>%{x:.3s} ${esc(unit)}<br>%{y:.3f}<extra></extra>` });
    }
    // Points at compute 0 (the first evaluation, before any training) cannot sit on a log axis: they are drawn at
    // the left edge as open diamonds. Points in the burn-in (left out of the fit) are open circles.
    const px = [], py = [], bx = [], by = [], first = [];
    const burn = run.burn_in || 0;
    run.points.x.forEach((x, i) => {
      const y = run.points.y[i];
      if (x <= 0) first.push(y);
      else if (x < burn) { bx.push(x); by.push(y); } else { px.push(x); py.push(y); }
    });
    out.push({ type: "scatter", mode: "markers", x: px, y: py, name: legendName(run.name), uid: `${group}-points`,
      marker: { color, size: 5, opacity: 0.85 }, legendgroup: group,
      hovertemplate: `${esc(run.name)}<br>%{x:.3s} ${esc(unit)}<br>pass rate %{y:.3f}<extra></extra>` });
    if (bx.length) {
      out.push({ type: "scatter", mode: "markers", x: bx, y: by, name: `${esc(run.name)} burn-in`, showlegend: false,
        uid: `${group}-burn`, legendgroup: group, marker: { color, size: 6, symbol: "circle-open" },
        hovertemplate: `${esc(run.name)}<br>%{x:.3s} ${esc(unit)}<br>pass rate %{y:.3f}`
          + "<br>burn-in: left out of the fit<extra></extra>" });
    }
    const positive = [...px, ...bx];
    if (first.length && positive.length) {
      const edge = Math.min(...positive) / 2;
      out.push({ type: "scatter", mode: "markers", x: first.map(() => edge), y: first, showlegend: false,
        uid: `${group}-first`, legendgroup: group, name: `${esc(run.name)} first evaluation`,
        marker: { color, size: 8, symbol: "diamond-open", line: { width: 1.5 } },
        hovertemplate: `${esc(run.name)}<br>first evaluation (compute 0)<br>pass rate %{y:.3f}<extra></extra>` });
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
    return [
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

  function draw(node, traces, lay) {
    return Plotly.react(node, traces, lay, CONFIG);
  }

  return { layout, runTraces, backgroundTraces, draw, rgba, esc, legendName };
})();

// Plotly figures of the dashboard: runs' points, fitted sigmoids, dotted extrapolations and forecast bands.
// Bands are plain `scatter` traces with fill='tonexty' (fill does not work on scattergl).
"use strict";

const Charts = (() => {
  const FONT = { family: "system-ui, -apple-system, Segoe UI, Roboto, Helvetica Neue, Arial, sans-serif",
    size: 12, color: "#1c2330" };
  const GRID = "#eceff3";
  const CONFIG = { displaylogo: false, responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"] };

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }

  function layout({ xTitle, yTitle, logX = true, height, legend = true, budget = null, yRange = null }) {
    const shapes = [];
    const annotations = [];
    if (budget) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: budget, x1: budget, y0: 0, y1: 1,
        line: { color: "#9aa3b0", width: 1, dash: "dash" } });
      annotations.push({ x: logX ? Math.log10(budget) : budget, xref: "x", y: 1, yref: "paper", text: "budget",
        showarrow: false, xanchor: "right", yanchor: "top", font: { size: 11, color: "#5f6b7a" } });
    }
    return {
      font: FONT, height, margin: { l: 56, r: 16, t: 10, b: 46 }, paper_bgcolor: "#fff", plot_bgcolor: "#fff",
      hovermode: "closest", showlegend: legend, shapes, annotations,
      legend: { orientation: "v", x: 1.01, y: 1, xanchor: "left", font: { size: 11.5 }, itemclick: "toggle" },
      xaxis: { type: logX ? "log" : "linear", title: { text: xTitle }, gridcolor: GRID, zeroline: false,
        exponentformat: "SI", linecolor: "#c8ced8", dtick: logX ? "D2" : undefined },
      yaxis: { title: { text: yTitle }, gridcolor: GRID, zeroline: false, range: yRange, linecolor: "#c8ced8" },
    };
  }

  // Traces of one highlighted run, in drawing order: band (lo, hi filled to it), fitted, extrapolation, points.
  function runTraces(run, color, unit) {
    const group = `run-${run.id}`;
    const out = [];
    if (run.band) {
      out.push({ type: "scatter", mode: "lines", x: run.band.x, y: run.band.lo, line: { width: 0, color },
        hoverinfo: "skip", showlegend: false, legendgroup: group });
      out.push({ type: "scatter", mode: "lines", x: run.band.x, y: run.band.hi, line: { width: 0, color },
        fill: "tonexty", fillcolor: rgba(color, 0.14), hoverinfo: "skip", showlegend: false, legendgroup: group,
        name: `${run.name} band` });
    }
    if (run.fitted) {
      out.push({ type: "scatter", mode: "lines", x: run.fitted.x, y: run.fitted.y, line: { color, width: 2 },
        name: `${run.name} fit`, hovertemplate: `${esc(run.name)} fit<br>%{x:.3s} ${esc(unit)}<br>%{y:.3f}<extra></extra>`,
        showlegend: false, legendgroup: group });
    }
    if (run.extrapolation) {
      out.push({ type: "scatter", mode: "lines", x: run.extrapolation.x, y: run.extrapolation.y,
        line: { color, width: 2, dash: "dot" }, name: `${run.name} forecast`, showlegend: false, legendgroup: group,
        hovertemplate: `${esc(run.name)} forecast<br>%{x:.3s} ${esc(unit)}<br>%{y:.3f}<extra></extra>` });
    }
    out.push({ type: "scatter", mode: "markers", x: run.points.x, y: run.points.y, name: esc(run.name),
      marker: { color, size: 5, opacity: 0.85 }, legendgroup: group,
      hovertemplate: `${esc(run.name)}<br>%{x:.3s} ${esc(unit)}<br>pass rate %{y:.3f}<extra></extra>` });
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
        hoverinfo: "skip", legendgroup: "others" },
    ];
  }

  // Plotly hover templates render HTML: run names there are escaped.
  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
      "'": "&#39;" }[c]));
  }

  function draw(node, traces, lay) {
    return Plotly.react(node, traces, lay, CONFIG);
  }

  return { layout, runTraces, backgroundTraces, draw, rgba, esc };
})();

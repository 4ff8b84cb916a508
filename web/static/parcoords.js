// Parallel coordinates on the experiment page: one line per run across an axis per recipe key that varies in the
// grid, then the forecast at budget and the ceiling A, coloured by the forecast at budget. Keys whose values are not
// all numbers are categorical: their values become integer ticks labelled with the values.
//
// Drawn as plain SVG lines (Plotly scatter traces on axes scaled to [0, 1]), not with Plotly's `parcoords` trace:
// that one renders through regl, which compiles its shaders with `new Function` and so cannot run under the page's
// Content-Security-Policy (no 'unsafe-eval'); Plotly then shows "WebGL is not supported" instead of the figure.
"use strict";

const Parcoords = (() => {
  const VIRIDIS = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"];
  const MAX_TICKS = 8;

  function viridis(t) {
    const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    const rgb = (hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
    const [a, b] = [rgb(VIRIDIS[i]), rgb(VIRIDIS[i + 1])];
    return `rgb(${a.map((v, k) => Math.round(v + (x - i) * (b[k] - v))).join(", ")})`;
  }

  const label = (v) => (v === undefined || v === null ? "—" : typeof v === "string" ? v : JSON.stringify(v));

  // One axis: `values` mapped to numbers (`coded`: categories as the index of their sorted label), the range they
  // are drawn over, and the ticks (value, label). Numbers spanning two decades or more get a log scale.
  function dimension(name, values, fixed = null) {
    if (values.every((v) => typeof v === "number" && Number.isFinite(v))) {
      const log = !fixed && values.every((v) => v > 0) && Math.max(...values) / Math.min(...values) >= 100;
      const f = log ? Math.log10 : (v) => v;
      const coded = values.map(f);
      const [lo, hi] = fixed || [Math.min(...coded), Math.max(...coded)];
      const distinct = [...new Set(values)].sort((a, b) => a - b);
      const ticks = fixed ? [0, 0.25, 0.5, 0.75, 1] : distinct.length <= MAX_TICKS ? distinct
        : [distinct[0], distinct[distinct.length - 1]];
      return { label: name, kind: log ? "log" : "number", values, coded, range: [lo, hi],
        tickvals: ticks.map(f), ticktext: ticks.map((t) => S.compact(t)) };
    }
    const labels = values.map(label);
    const ticktext = [...new Set(labels)].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
    const index = new Map(ticktext.map((t, i) => [t, i]));
    const coded = labels.map((t) => index.get(t));
    return { label: name, kind: "category", values: labels, coded, range: [0, Math.max(ticktext.length - 1, 1)],
      tickvals: ticktext.map((_, i) => i), ticktext };
  }

  const scale = (d, v) => (d.range[1] === d.range[0] ? 0.5 : (v - d.range[0]) / (d.range[1] - d.range[0]));

  // `rows`: [{ id, name, values: {key: value}, V: forecast at budget, A: ceiling }] (the page's numbers: the same
  // fit the runs table shows); `keys`: the recipe keys that vary. Runs without both numbers are not drawn (`note`
  // says how many). The axes (labels, coded values, ticks) are in `layout.meta.dimensions`.
  function draw(node, note, rows, keys) {
    const usable = rows.filter((r) => typeof r.V === "number" && typeof r.A === "number");
    const left = rows.length - usable.length;
    note.textContent = [keys.length ? null : "No recipe key varies in this grid: only the forecast and the ceiling.",
      left ? `${left} run(s) without a usable fit are not drawn.` : null].filter(Boolean).join(" ");
    node.hidden = !usable.length;
    if (!usable.length) return 0;
    const V = usable.map((r) => r.V);
    const dims = [...keys.map((k) => dimension(k, usable.map((r) => r.values[k]))),
      dimension("forecast at budget", V, [0, 1]), dimension("ceiling A", usable.map((r) => r.A), [0, 1])];
    const [vmin, vmax] = [Math.min(...V), Math.max(...V)];
    const xs = dims.map((_, i) => i);
    const traces = usable.map((r, j) => ({ type: "scatter", mode: "lines+markers", x: xs,
      y: dims.map((d) => scale(d, d.coded[j])), uid: `pc-run-${r.id}`, name: Charts.esc(r.name), showlegend: false,
      line: { color: viridis(vmax > vmin ? (r.V - vmin) / (vmax - vmin) : 0.5), width: 2 }, marker: { size: 5 },
      customdata: dims.map((d) => (d.kind === "category" ? Charts.esc(d.values[j]) : S.num(d.values[j], 4))),
      hovertemplate: `${Charts.esc(r.name)}<br>%{customdata}<extra></extra>` }));
    // The colour scale: one invisible marker carries the colour bar.
    traces.push({ type: "scatter", mode: "markers", x: [0], y: [0], hoverinfo: "skip", showlegend: false,
      uid: "pc-scale", marker: { size: 0.1, opacity: 0, color: [vmin], cmin: vmin, cmax: vmax, colorscale: "Viridis",
        showscale: true, colorbar: { title: { text: "at budget" }, thickness: 12 } } });
    const lay = Charts.layout({ xTitle: "", yTitle: "", logX: false, height: 380, legend: false });
    lay.margin = { l: 40, r: 40, t: 76, b: 24 };
    lay.hovermode = "closest";
    lay.xaxis = { range: [-0.45, dims.length - 0.75], visible: false, fixedrange: true };
    lay.yaxis = { range: [-0.06, 1.06], visible: false, fixedrange: true };
    lay.shapes = xs.map((x) => ({ type: "line", x0: x, x1: x, y0: 0, y1: 1, line: { color: "#9aa3b0", width: 1 } }));
    lay.annotations = dims.flatMap((d, i) => [
      // Neighbouring labels alternate between two rows so long recipe keys do not overlap.
      { x: i, y: 1.06, yshift: i % 2 ? 18 : 0, yanchor: "bottom", showarrow: false,
        text: `<b>${Charts.esc(d.label)}</b>${d.kind === "log" ? " (log)" : ""}` },
      ...d.tickvals.map((v, k) => ({ x: i, y: scale(d, v), xanchor: "right", xshift: -4, showarrow: false,
        text: Charts.esc(d.ticktext[k]), font: { size: 10.5 } }))]);
    lay.meta = { dimensions: dims.map((d) => ({ label: d.label, kind: d.kind, values: d.values, coded: d.coded,
      tickvals: d.tickvals, ticktext: d.ticktext })), runs: usable.map((r) => r.name), color: V };
    Charts.draw(node, traces, lay);
    return usable.length;
  }

  return { draw, dimension, viridis };
})();

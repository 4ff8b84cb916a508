// Run comparison on the experiment page: one metric of chosen runs against step, compute or wall time (seconds since
// the run's first point, by when the service received each point), log or linear x,
// exponential smoothing, a hover that lists every run at that x, and seeds of one recipe as a mean with a band.
"use strict";

const Compare = (() => {
  const { api, h } = S;
  let experimentId = null;
  let colorOf = () => "#2458d6";
  let last = null;

  function ema(y, alpha) {
    if (!alpha) return y;
    const out = [];
    let acc = null;
    for (const v of y) {
      acc = acc === null ? v : alpha * acc + (1 - alpha) * v;
      out.push(acc);
    }
    return out;
  }

  function interp(xs, ys, x) {
    if (x < xs[0] || x > xs[xs.length - 1]) return null;
    let i = 1;
    while (i < xs.length && xs[i] < x) i++;
    if (i >= xs.length || xs[i] === x) return ys[Math.min(i, xs.length - 1)];
    const t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
    return ys[i - 1] + t * (ys[i] - ys[i - 1]);
  }

  // Seeds of one recipe: mean and min–max on the x values they all cover.
  function grouped(runs, alpha) {
    const groups = new Map();
    for (const r of runs) {
      if (!groups.has(r.group)) groups.set(r.group, []);
      groups.get(r.group).push({ ...r, y: ema(r.y, alpha) });
    }
    return [...groups.values()].map((members) => {
      const lo = Math.max(...members.map((m) => m.x[0]));
      const hi = Math.min(...members.map((m) => m.x[m.x.length - 1]));
      const xs = [...new Set(members.flatMap((m) => m.x))].filter((x) => x >= lo && x <= hi).sort((a, b) => a - b);
      const vals = xs.map((x) => members.map((m) => interp(m.x, m.y, x)));
      return { label: members[0].group_label, runId: members[0].run_id, n: members.length, x: xs,
        mean: vals.map((v) => v.reduce((a, b) => a + b, 0) / v.length),
        min: vals.map((v) => Math.min(...v)), max: vals.map((v) => Math.max(...v)) };
    });
  }

  // The comparison's view is in the address too (cmp_* parameters; the page's own are kept).
  function writeView() {
    const q = new URLSearchParams([...new URLSearchParams(location.search)].filter(([k]) => !k.startsWith("cmp_")));
    for (const o of document.getElementById("cmp-runs").selectedOptions) q.append("cmp_run", o.value);
    q.set("cmp_metric", document.getElementById("cmp-metric").value || "pass_rate");
    q.set("cmp_x", document.getElementById("cmp-x").value);
    const smooth = document.getElementById("cmp-smooth").value;
    if (Number(smooth)) q.set("cmp_smooth", smooth);
    if (document.getElementById("cmp-logx").checked) q.set("cmp_logx", "1");
    if (document.getElementById("cmp-group").checked) q.set("cmp_group", "1");
    history.replaceState(null, "", `${location.pathname}?${q}`);
  }
  function readView(runs) {
    const q = new URLSearchParams(location.search);
    const chosen = q.getAll("cmp_run").map(Number);
    if (q.get("cmp_metric")) {
      const m = document.getElementById("cmp-metric");
      m.replaceChildren(h("option", { value: q.get("cmp_metric"), text: q.get("cmp_metric"), selected: true }));
    }
    if (["step", "compute", "time"].includes(q.get("cmp_x"))) document.getElementById("cmp-x").value = q.get("cmp_x");
    if (q.get("cmp_smooth")) document.getElementById("cmp-smooth").value = q.get("cmp_smooth");
    document.getElementById("cmp-logx").checked = q.get("cmp_logx") === "1";
    document.getElementById("cmp-group").checked = q.get("cmp_group") === "1";
    return chosen.filter((id) => runs.some((r) => r.id === id));
  }

  function draw() {
    if (!last) return;
    writeView();
    const alpha = Number(document.getElementById("cmp-smooth").value);
    const logX = document.getElementById("cmp-logx").checked;
    const group = document.getElementById("cmp-group").checked;
    const metric = last.metric;
    const traces = [];
    const runs = last.runs.filter((r) => r.x.length);
    // On a log x, points at x = 0 (step 0, compute 0, time 0) go to the lane at the left edge (Charts.draw), each
    // run's or recipe's value there as one marker; the lines start at the first positive x.
    const zeroName = last.x === "compute" ? "at compute 0" : last.x === "step" ? "at step 0" : "at time 0";
    const split = (r) => {
      const y = ema(r.y, alpha);
      if (!logX) return { ...r, y, zero: [] };
      const keep = r.x.map((x) => x > 0);
      return { ...r, x: r.x.filter((_, i) => keep[i]), y: y.filter((_, i) => keep[i]), zero: y.filter((_, i) => !keep[i]) };
    };
    const lane = (zero, c, uid, label) => {
      if (zero.length) {
        traces.push(Charts.zeroTrace([zero[zero.length - 1]], c, uid, label,
          `${Charts.esc(label)}<br>${zeroName}<br>%{y:.4g}<extra></extra>`));
      }
    };
    if (group) {
      const parts = runs.map(split);
      const byGroup = new Map();
      for (const r of parts) byGroup.set(r.group, [...(byGroup.get(r.group) || []), r]);
      for (const [, members] of byGroup) {
        const zeros = members.filter((m) => m.zero.length).map((m) => m.zero[m.zero.length - 1]);
        const label = members.length > 1 ? `${members[0].group_label} (mean of ${members.length} seeds)` : members[0].group_label;
        if (zeros.length) lane([zeros.reduce((a, b) => a + b, 0) / zeros.length], colorOf(members[0].run_id),
          `cmp-${members[0].group_label}-zero`, label);
      }
      for (const g of grouped(parts.filter((r) => r.x.length), 0)) {
        const c = colorOf(g.runId);
        const label = g.n > 1 ? `${g.label} (mean of ${g.n} seeds)` : g.label;
        if (g.n > 1) {
          traces.push({ type: "scatter", mode: "lines", x: g.x, y: g.min, line: { width: 0, color: c }, hoverinfo: "skip",
            showlegend: false, legendgroup: g.label, uid: `cmp-${g.label}-lo` });
          traces.push({ type: "scatter", mode: "lines", x: g.x, y: g.max, line: { width: 0, color: c }, fill: "tonexty",
            fillcolor: Charts.rgba(c, 0.15), hoverinfo: "skip", showlegend: false, legendgroup: g.label,
            uid: `cmp-${g.label}-hi` });
        }
        traces.push({ type: "scatter", mode: "lines", x: g.x, y: g.mean, name: Charts.legendName(label), legendgroup: g.label,
          uid: `cmp-${g.label}`, line: { color: c, width: 2 }, hovertemplate: `%{y:.4g}<extra>${Charts.esc(label)}</extra>` });
      }
    } else {
      for (const r of runs.map(split)) {
        traces.push({ type: "scatter", mode: "lines", x: r.x, y: r.y, name: Charts.legendName(r.name),
          uid: `cmp-run-${r.run_id}`, line: { color: colorOf(r.run_id), width: 1.6 },
          hovertemplate: `%{y:.4g}<extra>${Charts.esc(r.name)}</extra>` });
        lane(r.zero, colorOf(r.run_id), `cmp-run-${r.run_id}-zero`, r.name);
      }
    }
    const xTitle = last.x === "compute" ? `compute (${last.compute_unit})` : last.x_label;
    const lay = Charts.layout({ xTitle: xTitle + (logX ? ", log scale" : ""), yTitle: metric.replace("_", " "),
      logX, height: 380, uirevision: `${metric}|${last.x}|${logX}|${group}`, zeroLabel: zeroName });
    lay.hovermode = "x unified";
    Charts.draw(document.getElementById("cmp-chart"), traces, lay);
    const untimed = last.runs.reduce((n, r) => n + (r.without_time || 0), 0);
    document.getElementById("cmp-note").textContent = [runs.length < last.runs.length
      ? `${last.runs.length - runs.length} chosen run(s) have not reported ${metric} yet.` : null,
    untimed ? `${untimed} point(s) stored before arrival times were recorded are left out.` : null]
      .filter(Boolean).join(" ");
  }

  async function load() {
    const q = new URLSearchParams({ metric: document.getElementById("cmp-metric").value || "pass_rate",
      x: document.getElementById("cmp-x").value });
    for (const o of document.getElementById("cmp-runs").selectedOptions) q.append("run", o.value);
    try {
      last = await api(`/api/v1/dashboard/experiments/${experimentId}/metrics?${q}`);
    } catch (err) {
      document.getElementById("cmp-note").textContent = `Could not load the comparison: ${S.errorText(err)}`;
      return;
    }
    const select = document.getElementById("cmp-metric");
    const chosen = select.value || last.metric;
    select.replaceChildren(...last.metrics.map((m) => h("option", { value: m, text: m, selected: m === chosen })));
    draw();
  }

  // `runs`: the chart answer's runs (id, name, highlighted); `colors`: run id -> colour (the page's palette).
  function init(id, runs, colors) {
    experimentId = id;
    colorOf = (runId) => colors.get(runId) || "#2458d6";
    const select = document.getElementById("cmp-runs");
    const fromUrl = readView(runs);
    const preset = fromUrl.length ? fromUrl : runs.filter((r) => r.highlighted).slice(0, 6).map((r) => r.id);
    select.replaceChildren(...runs.map((r) => h("option", { value: r.id, text: r.name, selected: preset.includes(r.id) })));
    for (const idc of ["cmp-runs", "cmp-metric", "cmp-x"]) document.getElementById(idc).addEventListener("change", load);
    for (const idc of ["cmp-smooth", "cmp-logx", "cmp-group"]) document.getElementById(idc).addEventListener("input", draw);
    document.getElementById("cmp-refresh").addEventListener("click", load);
    load();
  }
  return { init, ema, grouped };
})();

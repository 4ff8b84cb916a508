// The run page: its pass rate and forecast, training metrics, how the forecast moved, status history. Live.
"use strict";

(() => {
  const { api, h, num, compact, interval, badge, color, when } = S;
  const id = Number(document.body.dataset.runId);
  // Each chart: the names it is reported under (the engine's first, then TRL's GRPOTrainer's), and its label.
  const PREFERRED = [
    [["train/reward_mean", "reward", "train/reward"], "reward (mean)"],
    [["train/truncation_rate", "completions/clipped_ratio"], "truncation rate"],
    [["train/entropy", "entropy", "train/entropy_mean"], "entropy"],
    [["train/staleness_mean"], "staleness (versions)"],
  ];
  const state = { run: null, series: null, index: 0, stream: null };

  async function load() {
    const [run, series, history] = await Promise.all([
      api(`/api/v1/runs/${id}`),
      api(`/api/v1/dashboard/runs/${id}/series`),
      api(`/api/v1/dashboard/runs/${id}/fit-history`),
    ]);
    state.run = run;
    state.series = series;
    if (!state.expLoaded) {
      const exp = await S.experimentWithRuns(run.experiment_id);
      state.index = exp.runs.findIndex((r) => r.id === run.id);
      const link = document.getElementById("exp-link");
      link.href = `/experiments/${exp.id}`;
      link.textContent = exp.name;
      state.expLoaded = true;
    }
    // The run's numbers are its experiment's assessment (the same as the experiment page's table and banner).
    const assessment = await api(`/api/v1/experiments/${run.experiment_id}/assessment`);
    state.assessment = assessment;
    header(run);
    chart(series, run);
    facts(run, assessment.runs.find((e) => e.id === run.id), assessment);
    metrics(series);
    historyChart(history, series.compute_unit);
    transitions(run);
    reach();
    await Alerts.fill(document.querySelector("#alerts tbody"), new URLSearchParams({ run_id: String(id), limit: "20" }),
      document.getElementById("alerts-empty")).catch(() => {});
  }

  function header(run) {
    document.getElementById("run-name").textContent = run.name;
    document.title = `${run.name} · scalerl`;
    const meta = [`run ${run.id}`, run.seed !== null ? `seed ${run.seed}` : null, run.task, run.model,
      `attempt ${run.attempts}`, run.lease_owner ? `worker ${run.lease_owner}` : null].filter(Boolean);
    document.getElementById("run-meta").textContent = meta.join(" · ");
    // The recipe's overrides, then the run's own description: config keys, tags and notes (runs you train yourself).
    document.getElementById("overrides").replaceChildren(...[
      ...Object.entries(run.overrides).map(([k, v]) => h("span", { class: "chip", text: `${k} = ${JSON.stringify(v)}` })),
      ...Object.entries(run.config || {}).map(([k, v]) => h("span", { class: "chip", "data-config": k,
        text: `config.${k} = ${JSON.stringify(v)}` })),
      ...Object.entries(run.summary || {}).map(([k, v]) => h("span", { class: "chip", "data-summary": k,
        text: `summary.${k} = ${JSON.stringify(v)}` })),
      ...(run.tags || []).map((t) => h("span", { class: "chip tag", "data-tag": t, text: `#${t}` })),
      run.notes ? h("p", { class: "muted small", id: "run-notes", text: run.notes }) : null].filter(Boolean));
    if (run.last_seen_at && S.statusIs("heard_from", run.status)) {
      meta.push(`last heard from ${S.when(run.last_seen_at)}`);
      document.getElementById("run-meta").textContent = meta.join(" · ");
    }
    document.getElementById("run-status").replaceChildren(badge(run.status),
      run.status_reason ? h("span", { class: "ci", text: ` ${run.status_reason}` }) : null);
    document.getElementById("run-actions").replaceChildren(...S.runActions(run, refreshSoon));
  }

  function chart(series, run) {
    const c = color(state.index);
    const traces = Charts.runTraces({ id: run.id, name: run.name, points: series.points, fitted: series.fitted,
      extrapolation: series.extrapolation, band: series.band, burn_in: series.burn_in }, c, series.compute_unit);
    Charts.draw("chart", traces, Charts.layout({ xTitle: `compute (${series.compute_unit}, log scale)`,
      yTitle: "pass rate", height: 400, legend: false, budget: run.budget }));
  }

  function facts(run, e, a) {
    const finished = S.statusIs("finished", run.status);
    const fitted = e && e.A !== null;
    const rows = [
      ["Status", run.status],
      ["Compute", `${compact(run.compute_used)} of ${compact(run.budget)}`],
      ["Points", String(run.n_points)],
      ["Fit", e ? `${e.fit_status}${a.pending ? " (a newer assessment is being computed)" : ""}` : "none yet"],
      ["Ceiling A", fitted ? `${num(e.A)} ${interval(e.A_lo, e.A_hi)}${e.ceiling_identified ? "" : " · not identified yet"}` : "—"],
      ["Efficiency B", fitted ? `${num(e.B, 2)} ${interval(e.B_lo, e.B_hi, 2)}` : "—"],
      ["C_mid", fitted ? `${compact(e.C_mid)}${e.C_mid_lo !== null ? ` [${compact(e.C_mid_lo)}, ${compact(e.C_mid_hi)}]` : ""}` : "—"],
      ["R0", fitted ? num(e.R0) : "—"],
      ["At budget", e && e.V_budget !== null ? `${num(e.V_budget)} ${interval(e.V_lo, e.V_hi)}` : "—"],
      ["Forecast", e && e.forecast ? e.forecast : "—"],
      ["Level", e ? `${Math.round(e.level * 100)}% intervals` : "—"],
      ["Fit used", a.fit],
      ["Assessment", a.version ? `v${a.version} of ${when(a.computed_at)}` : "not assessed yet"],
    ];
    document.getElementById("facts").replaceChildren(...rows.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]));
    document.getElementById("recommendation").replaceChildren(...(e && !finished && e.reason
      ? [h("h2", { text: "Recommendation" }), badge(e.action), h("span", { class: "rec-reason", "data-rule": e.rule || null, text: e.reason })]
      : []));
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return null;
    if (seconds < 90) return `${Math.round(seconds)} s`;
    if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
    if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
    return `${(seconds / 86400).toFixed(1)} days`;
  }

  // Compute (and wall-clock time at the run's pace) to reach a target pass rate, from the same full fit the
  // recommendations use; the ETA to the end of the budget beside it.
  let reachTries = 0;
  async function reach() {
    const input = document.getElementById("reach-target");
    const node = document.getElementById("reach");
    if (!input.value) {
      const fit = state.assessment ? state.assessment.runs.find((e) => e.id === id) : null;
      if (!fit || fit.A === null) { node.textContent = "no fit yet"; return; }
      input.value = Math.max(0.01, Math.min(0.99, Math.floor((fit.A - 0.01) * 100) / 100)).toFixed(2);
    }
    try {
      const r = await api(`/api/v1/runs/${id}/reach?target=${encodeURIComponent(input.value)}`);
      // The full fit is computed off the request path (reads never fit): ask again while it is pending.
      if (r.fit_pending && reachTries < 15) {
        reachTries += 1;
        node.textContent = "computing the full fit…";
        setTimeout(reach, 2000);
        return;
      }
      reachTries = 0;
      const unit = state.series.compute_unit;
      const parts = [];
      if (r.reachable === false) parts.push(`${num(r.target, 2)} is above the fitted ceiling`);
      else if (r.compute !== null) {
        // Far past the run's budget the number is the fitted curve carried outside its data: said with it.
        const far = r.extrapolation ? `≈ ` : "";
        parts.push(`reaches ${num(r.target, 2)} at ${far}${compact(r.compute)} ${unit}` +
          (r.lo !== null ? ` [${compact(r.lo)}, ${r.hi === null ? "never" : compact(r.hi)}]` : "") +
          (r.extrapolation ? ` (${r.extrapolation})` : ""));
      } else parts.push(r.reason);
      if (r.probability !== null) parts.push(`P(ever reached) = ${num(r.probability, 2)}`);
      // A finished run (the "finished" status rule) has no pace: no ETA, only whether it got there.
      const finished = S.statusIs("finished", state.run.status);
      const reached = r.compute !== null && r.compute !== undefined && r.compute <= r.compute_used;
      const eta = finished ? null : duration(r.eta_seconds);
      if (reached) parts.push("already reached");
      else if (eta) parts.push(`ETA ${eta} at the current pace`);
      else if (finished && r.compute !== null && r.compute !== undefined) parts.push(`not reached: the run ${state.run.status}`);
      const etaBudget = finished ? null : duration(r.eta_budget_seconds);
      if (etaBudget && r.budget !== null && r.compute_used < r.budget) parts.push(`budget used up in ${etaBudget}`);
      node.textContent = parts.join(" · ");
    } catch (err) {
      node.textContent = S.errorText(err);
    }
  }

  function smallChart(node, s, label, c) {
    // `label` may be a reported metric's name (any text): escaped, since Plotly renders markup in titles.
    Charts.draw(node, [{ type: "scatter", mode: "lines", x: s.x, y: s.y, line: { color: c, width: 1.5 },
      name: Charts.esc(label), hovertemplate: `step %{x}<br>${Charts.esc(label)} %{y:.4g}<extra></extra>` }],
    { ...Charts.layout({ xTitle: "step", yTitle: "", logX: false, height: 200, legend: false }),
      margin: { l: 44, r: 8, t: 26, b: 36 }, title: { text: Charts.esc(label), font: { size: 12.5 }, x: 0.02 } });
  }

  function metrics(series) {
    const box = document.getElementById("metrics");
    const c = color(state.index);
    const nodes = PREFERRED.map(([keys, label]) => {
      const key = keys.find((k) => series.metrics[k]) || keys[0];
      const s = series.metrics[key];
      const node = h("div", { class: "chart", "data-metric": key });
      if (!s) node.append(h("p", { class: "empty", text: `${label}: not reported` }));
      return [node, s, key === keys[0] ? label : `${label} (${key})`];
    });
    box.replaceChildren(...nodes.map(([n]) => n));
    for (const [node, s, label] of nodes) if (s) smallChart(node, s, label, c);
    const select = document.getElementById("other-metric");
    const chosen = select.value;
    const shown = new Set(nodes.filter(([, s]) => s).map(([n]) => n.dataset.metric));
    const others = Object.keys(series.metrics).filter((k) => !shown.has(k));
    select.replaceChildren(h("option", { value: "", text: others.length ? "—" : "none reported" }),
      ...others.map((k) => h("option", { value: k, text: k, selected: k === chosen })));
    drawOther();
  }

  function drawOther() {
    const key = document.getElementById("other-metric").value;
    const node = document.getElementById("other-chart");
    node.hidden = !key || !state.series.metrics[key];
    if (!node.hidden) smallChart(node, state.series.metrics[key], key, color(state.index));
  }

  function historyChart(hist, unit) {
    const full = hist.snapshots.filter((s) => s.kind === "full");
    const point = hist.snapshots.filter((s) => s.kind === "point");
    const c = color(state.index);
    const traces = [
      { type: "scatter", mode: "lines+markers", x: point.map((s) => s.compute_max), y: point.map((s) => s.A),
        name: "A (fast fit)", line: { color: c, width: 1 }, marker: { size: 4 }, hovertemplate: "A %{y:.3f}<br>after %{x:,.3~r} compute<extra></extra>" },
      { type: "scatter", mode: "markers", x: full.map((s) => s.compute_max), y: full.map((s) => s.A), name: "A (with interval)",
        marker: { color: c, size: 7, symbol: "diamond" }, error_y: { type: "data", symmetric: false, color: Charts.rgba(c, 0.6),
          array: full.map((s) => (s.A_hi === null ? 0 : s.A_hi - s.A)), arrayminus: full.map((s) => (s.A_lo === null ? 0 : s.A - s.A_lo)) } },
      { type: "scatter", mode: "lines+markers", x: point.map((s) => s.compute_max), y: point.map((s) => s.at_budget),
        name: "forecast at budget", line: { color: "#e8590c", width: 1, dash: "dot" }, marker: { size: 4 },
        hovertemplate: "at budget %{y:.3f}<br>after %{x:,.3~r} compute<extra></extra>" },
      { type: "scatter", mode: "markers", x: full.map((s) => s.compute_max), y: full.map((s) => s.at_budget),
        name: "forecast at budget (interval)", marker: { color: "#e8590c", size: 7, symbol: "diamond" },
        error_y: { type: "data", symmetric: false, color: "rgba(232,89,12,0.5)",
          array: full.map((s) => (s.at_budget_hi === null || s.at_budget === null ? 0 : s.at_budget_hi - s.at_budget)),
          arrayminus: full.map((s) => (s.at_budget_lo === null || s.at_budget === null ? 0 : s.at_budget - s.at_budget_lo)) } },
    ];
    const lay = Charts.layout({ xTitle: `compute seen by the fit (${unit}, log scale)`, yTitle: "pass rate", height: 340 });
    const observed = hist.observed_at_budget ?? hist.observed_latest;
    if (observed !== null && observed !== undefined) {
      lay.shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: observed, y1: observed,
        line: { color: "#2b8a3e", width: 1.5, dash: "dash" } });
      lay.annotations.push({ xref: "paper", x: 0, y: observed, yref: "y", xanchor: "left", yanchor: "bottom", showarrow: false,
        text: hist.observed_at_budget !== null ? `observed at budget ${num(observed)}` : `latest observed ${num(observed)} (budget not reached)`,
        font: { size: 11, color: "#2b8a3e" } });
    }
    if (!hist.snapshots.length) lay.annotations.push({ xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, text: "no fit yet" });
    Charts.draw("history", traces, lay);
  }

  function transitions(run) {
    const rows = [...run.transitions].reverse().map((t) => h("tr", {},
      h("td", { text: when(t.at) }), h("td", {}, t.from_status ? badge(t.from_status) : "—"), h("td", {}, badge(t.to_status)),
      h("td", { class: "num", text: String(t.attempt) }), h("td", { text: t.actor }), h("td", { class: "reason", text: t.reason })));
    document.querySelector("#transitions tbody").replaceChildren(...rows);
  }

  async function refresh() {
    try {
      await load();
      S.banner("");
    } catch (err) {
      if (err.status === 404 && !state.run) S.notFound(`Run ${id} does not exist`, "No run has this id on this server.");
      else S.banner(`Could not load run ${id}: ${S.errorText(err)}`);
    }
  }
  const refreshSoon = S.debounce(refresh, 250, 1000);
  document.getElementById("other-metric").addEventListener("change", drawOther);
  document.getElementById("reach-form").addEventListener("submit", (e) => { e.preventDefault(); reach(); });

  (async () => {
    await refresh();
    if (!state.run) return;
    RunLog.init(id, state.run.status);
    const live = document.getElementById("live");
    state.stream = S.stream(`/api/v1/experiments/${state.run.experiment_id}/events`, state.series.last_event_id,
      (type, ev) => { if (ev.run_id === id || type === "recommendations") refreshSoon(); },
      (on) => S.liveState(live, on));
  })();
})();

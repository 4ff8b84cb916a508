// The experiment page: chart of every run, rankings, ceiling-vs-efficiency read-out, runs table with actions.
// Live: the experiment's event stream triggers a refetch of the (server-downsampled) chart data.
"use strict";

(() => {
  const { api, h, num, compact, interval, badge } = S;
  let palette = new Map();
  const color = (r) => palette.get(r.id) || "#aab2be";
  const id = Number(document.body.dataset.experimentId);
  const state = { chart: null, recs: new Map(), verdict: null, highlight: 8, include: new Set(), stream: null, exp: null,
    sort: { key: null, dir: 1 }, cols: [], varying: [] };
  const chartNode = document.getElementById("chart");

  async function loadExperiment() {
    const exp = await api(`/api/v1/experiments/${id}`);
    state.exp = exp;
    const doc = exp.document || {};
    document.getElementById("exp-name").textContent = exp.name;
    document.title = `${exp.name} · scalerl`;
    const parts = [doc.task, doc.model, doc.budget !== undefined ? `budget ${compact(doc.budget)} ${doc.compute_unit || ""}` : null,
      `policy: ${exp.policy}`, doc.description || null].filter(Boolean);
    document.getElementById("exp-meta").textContent = parts.join(" · ");
    // Which shape prior the forecasts use: a team prior learned at submission, or why flat priors are used.
    const node = document.getElementById("exp-prior");
    node.textContent = exp.fit_prior ? `Forecasts: ${exp.fit_prior}` : "";
    node.hidden = !exp.fit_prior;
  }

  async function loadChart() {
    const q = new URLSearchParams({ highlight: String(state.highlight) });
    for (const r of state.include) q.append("include", String(r));
    state.chart = await api(`/api/v1/dashboard/experiments/${id}/chart?${q}`);
    palette = S.colors(state.chart.runs);
    return state.chart;
  }

  async function loadRecs() {
    const out = await api(`/api/v1/experiments/${id}/recommendations`);
    state.recs = new Map(out.recommendations.map((r) => [r.run_id, r]));
  }

  function drawChart() {
    const c = state.chart;
    const unit = c.compute_unit;
    const top = c.runs.filter((r) => r.highlighted).sort((a, b) => (a.rank_ceiling || 1e9) - (b.rank_ceiling || 1e9));
    const rest = c.runs.filter((r) => !r.highlighted);
    const traces = [...Charts.backgroundTraces(rest)];
    for (const r of top) traces.push(...Charts.runTraces(r, color(r), unit));
    const total = c.runs.reduce((n, r) => n + r.points_total, 0);
    const shown = c.runs.reduce((n, r) => n + r.points.x.length, 0);
    document.getElementById("chart-note").textContent = shown < total
      ? `${shown.toLocaleString()} of ${total.toLocaleString()} points shown (downsampled)` : "";
    Charts.draw(chartNode, traces, Charts.layout({ xTitle: `compute (${unit}, log scale)`, yTitle: "pass rate",
      height: 460, budget: c.max_budget }));
  }

  // Label the chart, rankings and table with the data they reflect (the chart answer: points up to this step).
  function asOf() {
    const c = state.chart;
    const step = c.as_of_step === null || c.as_of_step === undefined ? "no step reported yet"
      : `step ${c.as_of_step.toLocaleString("en-US")}`;
    const text = `as of ${step} · ${S.when(c.as_of)}`;
    for (const node of document.querySelectorAll("[data-as-of]")) node.textContent = text;
  }

  function chips() {
    const counts = {};
    for (const r of state.chart.runs) counts[r.status] = (counts[r.status] || 0) + 1;
    document.getElementById("status-chips").replaceChildren(
      ...Object.entries(counts).map(([s, n]) => badge(s, `${n} ${s}`)));
  }

  // Ranked on the same numbers as the runs table (the decision's fit where there is one), so both agree.
  function rankings() {
    const rows = state.chart.runs.map((r) => ({ r, f: decidedFit(r, state.recs.get(r.id)) }))
      .filter(({ r }) => state.recs.has(r.id) || r.rank_ceiling !== null);  // a usable fit only
    const list = (value, fmt) => rows.filter((x) => value(x.f) !== null).sort((a, b) => value(b.f) - value(a.f))
      .slice(0, 10).map(({ r, f }) => h("li", {}, h("span", { class: "swatch", style: `background:${color(r)}` }),
        h("a", { href: `/runs/${r.id}`, text: r.name }), h("span", { class: "val", text: fmt(f) })));
    const empty = () => h("li", { class: "muted", text: "no usable fit yet" });
    const byA = list((f) => (f.A === null || f.A === undefined ? null : f.A), (f) => `${num(f.A)} ${interval(f.A_lo, f.A_hi)}`);
    const byB = list((f) => (f.at_budget ? f.at_budget.mean : null),
      (f) => `${num(f.at_budget.mean)} ${interval(f.at_budget.lo, f.at_budget.hi)}`);
    document.getElementById("rank-ceiling").replaceChildren(...(byA.length ? byA : [empty()]));
    document.getElementById("rank-budget").replaceChildren(...(byB.length ? byB : [empty()]));
  }

  // The fit columns beside a recommendation show the fit the decision used (its stored numbers), so that the
  // table never pairs one fit's A with another fit's recommendation; without a recommendation, the latest fit.
  function decidedFit(r, rec) {
    if (!rec) return r;
    const n = rec.numbers;
    const v = (k) => (n[k] === undefined ? null : n[k]);
    return { A: v("A"), A_lo: v("A_lo"), A_hi: v("A_hi"), B: v("B"), B_lo: v("B_lo"), B_hi: v("B_hi"),
      C_mid: v("C_mid"), C_mid_lo: v("C_mid_lo"), C_mid_hi: v("C_mid_hi"),
      at_budget: v("V_budget") === null ? null : { mean: n.V_budget, lo: v("V_lo"), hi: v("V_hi") } };
  }

  // The note beside a run's name describes the fit whose numbers the row shows: the decision's when the row shows
  // a recommendation's numbers (never "insufficient data" beside a fitted A), else the latest fit's.
  function fitNote(r, rec) {
    const status = rec ? (["insufficient_data", "unstable"].includes(rec.action) ? rec.action : "ok") : r.fit_status;
    return status !== "ok" ? h("span", { class: "ci", text: ` · ${status.replace("_", " ")}` }) : null;
  }

  function runRow(r) {
    const rec = state.recs.get(r.id);
    const f = decidedFit(r, rec);
    const seen = rec && rec.numbers.n_points !== undefined && rec.numbers.n_points !== null
      ? h("span", { class: "ci", text: ` (decided on a fit of ${rec.numbers.n_points} evaluations)` }) : null;
    const budget = r.budget ? `${compact(r.compute_used)} / ${compact(r.budget)}` : compact(r.compute_used);
    const atB = f.at_budget ? [num(f.at_budget.mean), h("br"), h("span", { class: "ci", text: interval(f.at_budget.lo, f.at_budget.hi) })] : "—";
    const withCi = (v, lo, hi, d) => [num(v, d), h("br"), h("span", { class: "ci", text: interval(lo, hi, d) })];
    return h("tr", { "data-run-id": r.id, "data-status": r.status },
      h("td", {}, h("span", { class: "swatch", style: `background:${color(r)}` }),
        h("a", { href: `/runs/${r.id}`, text: r.name }),
        fitNote(r, rec)),
      ...state.cols.map((k) => h("td", { "data-col": `recipe:${k}` },
        h("code", { text: recipeValue(r, k) === undefined ? "—" : JSON.stringify(recipeValue(r, k)) }))),
      h("td", {}, badge(r.status)),
      h("td", { class: "num" }, budget),
      h("td", { class: "num", "data-col": "A" }, f.A === null ? "—" : withCi(f.A, f.A_lo, f.A_hi, 3)),
      h("td", { class: "num" }, f.B === null ? "—" : withCi(f.B, f.B_lo, f.B_hi, 2)),
      h("td", { class: "num" }, f.C_mid === null ? "—" : [compact(f.C_mid), h("br"),
        h("span", { class: "ci", text: f.C_mid_lo === null ? "" : `[${compact(f.C_mid_lo)}, ${compact(f.C_mid_hi)}]` })]),
      h("td", { class: "num", "data-col": "at_budget" }, atB),
      h("td", { "data-col": "recommendation" }, rec ? [badge(rec.action), h("span", { class: "rec-reason", "data-rule": rec.rule || null, text: rec.reason }), seen]
        : h("span", { class: "ci", text: "—" })),
      h("td", { class: "actions-cell" }, S.runActions(r, refreshSoon)));
  }

  // The runs table: sortable by any column (a click or Enter on its header), with a column per chosen recipe key
  // among those that vary in the grid ("Columns").
  const COLUMNS = [["name", "Run", ""], ["status", "Status", ""], ["compute", "Compute / budget", "num"],
    ["A", "A (ceiling)", "num"], ["B", "B", "num"], ["C_mid", "C_mid", "num"], ["at_budget", "At budget", "num"],
    ["recommendation", "Recommendation", ""]];
  function sortValue(r, key) {
    const rec = state.recs.get(r.id);
    const f = decidedFit(r, rec);
    if (key === "name") return r.name;
    if (key === "status") return r.status;
    if (key === "compute") return r.compute_used;
    if (key === "at_budget") return f.at_budget ? f.at_budget.mean : null;
    if (key === "recommendation") return rec ? rec.action : null;
    if (key.startsWith("recipe:")) return recipeValue(r, key.slice(7)) ?? null;
    return f[key] ?? null;
  }
  function compare(a, b) {
    if (a === b) return 0;
    if (a === null || a === undefined) return 1;  // blanks last, either way
    if (b === null || b === undefined) return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), "en", { numeric: true });
  }
  // A run's value of a dotted recipe key: its full recipe (the experiment answer), else its overrides.
  function recipeValue(r, key) {
    const run = state.exp && (state.exp.runs || []).find((x) => x.id === r.id);
    let v = run && run.recipe ? run.recipe : null;
    for (const part of key.split(".")) v = v && typeof v === "object" ? v[part] : undefined;
    return v === undefined ? r.overrides[key] : v;
  }
  function varyingKeys() {
    const runs = state.chart.runs;
    const keys = [...new Set(runs.flatMap((r) => Object.keys(r.overrides)))].sort();
    return keys.filter((k) => new Set(runs.map((r) => JSON.stringify(recipeValue(r, k) ?? null))).size > 1);
  }
  // The recipe keys that vary, computed once per refresh: the column picker and the parallel coordinates use them.
  function columnPicker() {
    const keys = state.varying;
    state.cols = state.cols.filter((k) => keys.includes(k));
    const box = document.getElementById("col-options");
    box.replaceChildren(...(keys.length ? keys.map((k) => h("label", { class: "col-option" },
      h("input", { type: "checkbox", value: k, checked: state.cols.includes(k), onchange: (e) => {
        state.cols = e.target.checked ? [...state.cols, k] : state.cols.filter((c) => c !== k);
        runsTable();
      } }), ` ${k}`)) : [h("span", { class: "muted", text: "no recipe key varies" })]));
  }
  function tableHead() {
    const cols = [COLUMNS[0], ...state.cols.map((k) => [`recipe:${k}`, k, ""]), ...COLUMNS.slice(1)];
    const th = ([key, label, cls]) => {
      const sorted = state.sort.key === key ? (state.sort.dir > 0 ? "ascending" : "descending") : "none";
      return h("th", { scope: "col", class: cls || null, "aria-sort": sorted },
        h("button", { type: "button", class: "sort", "data-sort": key, text: label + (sorted === "ascending" ? " ▲"
          : sorted === "descending" ? " ▼" : ""), onclick: () => {
          state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : (cls === "num" ? -1 : 1) };
          runsTable();
        } }));
    };
    document.querySelector("#runs thead").replaceChildren(h("tr", {}, ...cols.map(th),
      h("th", { scope: "col" }, h("span", { class: "sr-only", text: "Actions" }))));
  }

  function runsTable() {
    const filter = document.getElementById("run-filter").value.trim().toLowerCase();
    let runs = state.chart.runs
      .filter((r) => !filter || r.name.toLowerCase().includes(filter) || r.status.includes(filter));
    if (state.sort.key) {
      const { key, dir } = state.sort;
      runs = [...runs].sort((a, b) => {
        const va = sortValue(a, key), vb = sortValue(b, key);
        if (va === null || va === undefined || vb === null || vb === undefined) return compare(va, vb);
        return dir * compare(va, vb);
      });
    }
    columnPicker();
    tableHead();
    document.querySelector("#runs tbody").replaceChildren(...runs.map(runRow));
    writeView();
  }

  // Parallel coordinates: the varied recipe keys against the forecast at budget and A of the table's fit.
  function parallel() {
    const rows = state.chart.runs.map((r) => {
      const f = decidedFit(r, state.recs.get(r.id));
      return { id: r.id, name: r.name, values: Object.fromEntries(state.varying.map((k) => [k, recipeValue(r, k)])),
        V: f.at_budget ? f.at_budget.mean : null, A: f.A };
    });
    Parcoords.draw(document.getElementById("parcoords"), document.getElementById("parcoords-note"), rows,
      state.varying);
  }

  // The verdict banner names the decision's best run and its forecast at budget. It is computed by its own request,
  // so it says when; if its numbers for that run are not the table's (a fit came in between), it says so and is
  // fetched again, so the page does not show two fits' numbers side by side without a word.
  async function loadVerdict() {
    const node = document.getElementById("verdict");
    try {
      const v = await api(`/api/v1/experiments/${id}/verdict`);
      state.verdict = { v, at: new Date().toISOString() };
      const head = v.best_run_name
        ? `${v.decided ? "Decided" : "Leading"}: ${v.best_run_name}` + (v.basis !== "none" ? ` (by ${v.basis})` : "")
        : "No winner yet";
      const best = v.ranking.find((r) => r.run_id === v.best_run_id);
      node.replaceChildren(...[h("strong", { text: head }), " ",
        best && best.V_budget !== null ? h("span", { "data-best-run": best.run_id, "data-v-budget": best.V_budget,
          text: `forecasts ${num(best.V_budget)} at the budget; ` }) : null,
        v.difference_at_budget !== null ? h("span", { text: `${num(v.difference_at_budget)} above ${v.runner_up_name}` + (v.confidence !== null ? `, P = ${num(v.confidence, 2)}` : "") + ". " }) : null,
        h("span", { class: "muted", text: v.reason }), " ",
        h("span", { class: "as-of", id: "verdict-as-of" })].filter((c) => c !== null));
      node.className = "verdict " + (v.decided ? "decided" : "open");
      node.hidden = false;
      verdictAgrees();
    } catch (err) {
      node.hidden = true;
    }
  }
  // Does the banner show the table's numbers for its best run? (Run after either is redrawn.)
  function verdictAgrees() {
    const label = document.getElementById("verdict-as-of");
    if (!label || !state.verdict || !state.chart) return;
    const { v, at } = state.verdict;
    const best = v.ranking.find((r) => r.run_id === v.best_run_id);
    const run = state.chart.runs.find((r) => r.id === v.best_run_id);
    const f = run ? decidedFit(run, state.recs.get(run.id)) : null;
    const same = !best || !f || (f.at_budget ? f.at_budget.mean : null) === best.V_budget;
    const retry = !same && state.verdictRetried !== state.chart.as_of;  // once per table refresh
    label.textContent = same ? `verdict of ${S.when(at)}, on the table's fit`
      : `verdict of ${S.when(at)}, from another fit than the table below` + (retry ? ": updating" : "");
    label.dataset.agrees = same ? "yes" : "no";
    if (retry) {
      state.verdictRetried = state.chart.as_of;
      slowSoon();
    }
  }

  async function loadComparison() {
    const out = await api(`/api/v1/dashboard/experiments/${id}/comparison`);
    const note = out.reference_name
      ? `Each run against ${out.reference_kind === "base" ? "the leave-one-out base" : "the run with the highest ceiling"}`
        + ` (${out.reference_name}). Ceilings more than ±${out.margin} apart differ in ceiling A; otherwise both are`
        + " refitted at their common A and compared on efficiency B."
      : "Needs at least one run with a usable fit.";
    document.getElementById("ceff-note").textContent = note + (out.skipped ? ` ${out.skipped} runs not compared.` : "");
    document.getElementById("ceff-as-of").textContent = `computed ${S.when(new Date().toISOString())} from the`
      + " latest fits (refitted per pair at a common A), so ΔA may differ slightly from the table's A";
    const byId = new Map(state.chart.runs.map((r) => [r.id, r]));
    const label = { ceiling: "ceiling", efficiency: "efficiency", none: "no difference", unknown: "not yet" };
    const arrow = { better: " ↑", worse: " ↓", same: "", unknown: "" };
    const rows = out.rows.map((c) => {
      const r = byId.get(c.run_id);
      const change = Object.entries(c.changes).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ") || "(same recipe)";
      return h("tr", {},
        h("td", {}, r ? h("span", { class: "swatch", style: `background:${color(r)}` }) : null,
          h("a", { href: `/runs/${c.run_id}`, text: c.run_name })),
        h("td", {}, h("code", { text: change })),
        h("td", {}, badge(`${c.effect}-${c.direction}`, label[c.effect] + arrow[c.direction])),
        h("td", { class: "num", text: c.A_diff === null ? "—" : (c.A_diff >= 0 ? "+" : "") + num(c.A_diff) }),
        h("td", { class: "num", text: num(c.probability_higher, 2) }),
        h("td", { class: "reason", text: c.reason }));
    });
    document.querySelector("#comparison tbody").replaceChildren(...rows);
  }

  async function refresh() {
    try {
      await Promise.all([loadChart(), loadRecs()]);
      drawChart();
      asOf();
      chips();
      rankings();
      state.varying = varyingKeys();
      runsTable();
      parallel();
      verdictAgrees();
      S.banner("");
    } catch (err) {
      S.banner(`Could not load the experiment: ${S.errorText(err)}`);
    }
  }
  const refreshSoon = S.debounce(refresh, 250, 1000);
  const loadAlerts = () => Alerts.fill(document.querySelector("#alerts tbody"),
    new URLSearchParams({ experiment_id: String(id), limit: "10" }), document.getElementById("alerts-empty")).catch(() => {});
  const slowSoon = S.debounce(() => { loadVerdict(); loadComparison().catch(() => {}); loadAlerts(); }, 500, 5000);

  function onEvent(type) {
    refreshSoon();
    if (type === "status") slowSoon();
    if (type === "fit" || type === "recommendations" || type === "run_created") slowSoon();
  }

  // The view is in the address (highlight, filter, sort, columns), so a copied link opens the same view.
  function readView() {
    const q = new URLSearchParams(location.search);
    const hl = Number(q.get("highlight"));
    if ([4, 8, 16].includes(hl)) {
      state.highlight = hl;
      document.getElementById("highlight").value = String(hl);
    }
    document.getElementById("run-filter").value = q.get("filter") || "";
    const sort = q.get("sort") || "";
    if (sort) state.sort = { key: sort.replace(/^-/, ""), dir: sort.startsWith("-") ? -1 : 1 };
    state.cols = q.getAll("col");
  }
  function writeView() {
    const q = new URLSearchParams();
    for (const [k, v] of new URLSearchParams(location.search)) if (k.startsWith("cmp_")) q.append(k, v);  // Compare's
    if (state.highlight !== 8) q.set("highlight", String(state.highlight));
    const filter = document.getElementById("run-filter").value.trim();
    if (filter) q.set("filter", filter);
    if (state.sort.key) q.set("sort", (state.sort.dir < 0 ? "-" : "") + state.sort.key);
    for (const c of state.cols) q.append("col", c);
    const text = q.toString();
    history.replaceState(null, "", location.pathname + (text ? `?${text}` : ""));
  }
  readView();

  document.getElementById("highlight").addEventListener("change", (e) => {
    state.highlight = Number(e.target.value);
    refresh();
  });
  document.getElementById("run-filter").addEventListener("input", () => runsTable());

  // Downloads: the runs table as CSV (one column per recipe key that varies in the grid; the same numbers as the
  // table), and the chart answer and recommendations as JSON.
  function tableRows() {
    const runs = state.chart.runs;
    const keys = [...new Set(runs.flatMap((r) => Object.keys(r.overrides)))].sort();
    const rows = runs.map((r) => {
      const rec = state.recs.get(r.id);
      const f = decidedFit(r, rec);
      const row = { id: r.id, name: r.name, status: r.status, compute_used: r.compute_used, budget: r.budget,
        A: f.A, A_lo: f.A_lo, A_hi: f.A_hi, B: f.B, C_mid: f.C_mid,
        at_budget: f.at_budget ? f.at_budget.mean : null, at_budget_lo: f.at_budget ? f.at_budget.lo : null,
        at_budget_hi: f.at_budget ? f.at_budget.hi : null, recommendation: rec ? rec.action : null,
        reason: rec ? rec.reason : null };
      for (const k of keys) row[`recipe:${k}`] = recipeValue(r, k);
      return row;
    });
    const columns = [["id", "run_id"], ["name", "name"], ["status", "status"],
      ...keys.map((k) => [`recipe:${k}`, k]), ["compute_used", "compute_used"], ["budget", "budget"],
      ["A", "A"], ["A_lo", "A_lo"], ["A_hi", "A_hi"], ["B", "B"], ["C_mid", "C_mid"], ["at_budget", "at_budget"],
      ["at_budget_lo", "at_budget_lo"], ["at_budget_hi", "at_budget_hi"], ["recommendation", "recommendation"],
      ["reason", "reason"]];
    return { columns, rows };
  }
  const slug = () => (state.exp ? state.exp.name : `experiment-${id}`).replace(/[^\w.-]+/g, "_");
  document.getElementById("export-csv").addEventListener("click", () => {
    if (!state.chart) return;
    const { columns, rows } = tableRows();
    Export.csv(columns, rows, `${slug()}-runs.csv`);
  });
  document.getElementById("export-json").addEventListener("click", () => {
    if (!state.chart) return;
    Export.json({ experiment: state.exp, chart: state.chart, recommendations: [...state.recs.values()] },
      `${slug()}-chart.json`);
  });

  (async () => {
    try {
      await loadExperiment();
    } catch (err) {
      if (err.status === 404) S.notFound(`Experiment ${id} does not exist`, "No experiment has this id on this server.");
      else S.banner(`Could not load experiment ${id}: ${S.errorText(err)}`);
      return;
    }
    await refresh();
    if (!state.chart) return;
    loadVerdict();
    loadComparison().catch(() => {});
    loadAlerts();
    document.getElementById("alerts-link").href = `/alerts?experiment_id=${id}`;
    Compare.init(id, state.chart.runs, palette);
    const live = document.getElementById("live");
    state.stream = S.stream(`/api/v1/experiments/${id}/events`, state.chart.last_event_id, onEvent,
      (on) => S.liveState(live, on));
  })();
})();

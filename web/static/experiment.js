// The experiment page: chart of every run, rankings, ceiling-vs-efficiency read-out, runs table with actions.
// Live: the experiment's event stream triggers a refetch of the (server-downsampled) chart data.
// The runs table shows each run's tags (a column while any run has some); a click on a tag, or `?tag=` in the
// address (repeatable), keeps the runs having every chosen tag.
"use strict";

(() => {
  const { api, h, num, compact, interval, badge } = S;
  let palette = new Map();
  const color = (r) => palette.get(r.id) || "#aab2be";
  const id = Number(document.body.dataset.experimentId);
  const state = { chart: null, recs: new Map(), verdict: null, highlight: 8, include: new Set(), stream: null, exp: null,
    sort: { key: null, dir: 1 }, cols: [], varying: [], tags: [] };
  const chartNode = document.getElementById("chart");

  async function loadExperiment() {
    const exp = await S.experimentWithRuns(id);  // every page of its runs (their recipes: the table's columns)
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

  // One truth: the chart and everything else on the page (table, banner, rankings, card) come from the
  // experiment's one stored assessment; if the two answers are of different versions (a new assessment was stored
  // between the two requests), both are read again, so the page never mixes two assessments.
  async function loadChart() {
    const q = new URLSearchParams({ highlight: String(state.highlight) });
    for (const r of state.include) q.append("include", String(r));
    for (let tries = 0; tries < 3; tries += 1) {
      const [chart, assessment] = await Promise.all([api(`/api/v1/dashboard/experiments/${id}/chart?${q}`),
        api(`/api/v1/experiments/${id}/assessment`)]);
      state.chart = chart;
      state.assessment = assessment;
      if (chart.assessment_version === assessment.version) break;
    }
    palette = S.colors(state.chart.runs);
    // The advice of each run (the assessment gives finished runs the action "none": nothing left to stop or scale).
    state.entries = new Map(state.assessment.runs.map((e) => [e.id, e]));
    state.recs = new Map(state.assessment.runs.filter((e) => e.action !== "none")
      .map((e) => [e.id, { run_id: e.id, action: e.action, rule: e.rule, reason: e.reason, numbers: e.numbers }]));
    return state.chart;
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
    const a = state.assessment;
    const step = c.as_of_step === null || c.as_of_step === undefined ? "no step reported yet"
      : `step ${c.as_of_step.toLocaleString("en-US")}`;
    const version = a && a.version ? `assessment v${a.version} of ${S.when(a.computed_at)}` : "not assessed yet";
    const text = `${version}${a && a.pending ? " (a newer one is being computed)" : ""} · points as of ${step}`;
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
    const rows = state.chart.runs.map((r) => ({ r, f: decidedFit(r) }))
      .filter(({ r }) => r.rank_ceiling !== null || r.rank_at_budget !== null);  // a usable fit only
    const list = (value, fmt) => rows.filter((x) => value(x.f) !== null).sort((a, b) => value(b.f) - value(a.f))
      .slice(0, 10).map(({ r, f }) => h("li", {}, h("span", { class: "swatch", style: `background:${color(r)}` }),
        h("a", { href: `/runs/${r.id}`, text: r.name }), h("span", { class: "val", text: fmt(f) })));
    const empty = () => h("li", { class: "muted", text: "no usable fit yet" });
    const byA = list((f) => (f.A === null || f.A === undefined || !f.ceiling_identified ? null : f.A),
      (f) => `${num(f.A)} ${interval(f.A_lo, f.A_hi)}`);
    const byB = list((f) => (f.at_budget ? f.at_budget.mean : null),
      (f) => `${num(f.at_budget.mean)} ${interval(f.at_budget.lo, f.at_budget.hi)}`);
    document.getElementById("rank-ceiling").replaceChildren(...(byA.length ? byA : [empty()]));
    document.getElementById("rank-budget").replaceChildren(...(byB.length ? byB : [empty()]));
    // Say who each ranking leaves out, and why (one meaning of "identified": the assessment's ceiling_identified).
    const names = (xs) => xs.map((x) => x.r.name).join(", ");
    const unidentified = rows.filter(({ f }) => f.A !== null && f.A !== undefined && !f.ceiling_identified);
    const unfitted = state.chart.runs.filter((r) => r.rank_ceiling === null && r.rank_at_budget === null)
      .map((r) => ({ r }));
    const unvalued = rows.filter(({ f }) => !f.at_budget);
    const notes = (parts) => parts.filter(([xs]) => xs.length).map(([xs, why]) => `${names(xs)}: ${why}`).join("; ");
    document.getElementById("rank-ceiling-note").textContent = notes([
      [unidentified, "ceiling not identified (on the A = 1 bound, outside its own interval, or its interval too wide)"],
      [unfitted, "no usable fit yet"]]);
    document.getElementById("rank-budget-note").textContent = notes([
      [unvalued, "no value at the budget"], [unfitted, "no usable fit yet"]]);
  }

  // Every number of a row is the assessment's (the same the decision, the banner, the rankings and the card use).
  function decidedFit(r) {
    const e = state.entries.get(r.id);
    if (!e) return { A: null, B: null, C_mid: null, at_budget: null, ceiling_identified: false };
    return { A: e.A, A_lo: e.A_lo, A_hi: e.A_hi, B: e.B, B_lo: e.B_lo, B_hi: e.B_hi, C_mid: e.C_mid,
      C_mid_lo: e.C_mid_lo, C_mid_hi: e.C_mid_hi, ceiling_identified: e.ceiling_identified,
      at_budget: e.V_budget === null ? null : { mean: e.V_budget, lo: e.V_lo, hi: e.V_hi } };
  }

  // The note beside a run's name: its fit's status when it is not a usable fit.
  function fitNote(r) {
    const e = state.entries.get(r.id);
    const status = e ? e.fit_status : r.fit_status;
    return status !== "ok" ? h("span", { class: "ci", text: ` · ${status.replace("_", " ")}` }) : null;
  }

  // A run's own record in the experiment answer (its config, summary and tags; the chart answer has none of them).
  function runRecord(r) {
    return state.exp && (state.exp.runs || []).find((x) => x.id === r.id);
  }
  function runTags(r) {
    const run = runRecord(r);
    return (run && run.tags) || [];
  }
  const anyTags = () => ((state.exp && state.exp.runs) || []).some((r) => (r.tags || []).length);
  // A tag as a button: in a row it adds itself to the tag filter, in the filter it removes itself.
  function tagChip(t, active) {
    return h("button", { type: "button", class: "chip tag", "data-tag": t, style: "border: 0; cursor: pointer",
      title: active ? `Show runs without #${t} too` : `Show only runs tagged #${t}`,
      text: active ? `#${t} ×` : `#${t}`, onclick: () => {
        state.tags = active ? state.tags.filter((x) => x !== t) : [...new Set([...state.tags, t])];
        runsTable();
      } });
  }
  function tagFilter() {
    const node = document.getElementById("tag-filter");
    node.hidden = !state.tags.length;
    node.replaceChildren(...(state.tags.length ? [h("span", { class: "muted small", text: "Runs tagged " }),
      ...state.tags.map((t) => tagChip(t, true))] : []));
  }

  function runRow(r) {
    const rec = state.recs.get(r.id);
    const f = decidedFit(r);
    const seen = rec && rec.numbers.n_points !== undefined && rec.numbers.n_points !== null
      ? h("span", { class: "ci", text: ` (decided on a fit of ${rec.numbers.n_points} evaluations)` }) : null;
    const budget = r.budget ? `${compact(r.compute_used)} / ${compact(r.budget)}` : compact(r.compute_used);
    const atB = f.at_budget ? [num(f.at_budget.mean), h("br"), h("span", { class: "ci", text: interval(f.at_budget.lo, f.at_budget.hi) })] : "—";
    const withCi = (v, lo, hi, d) => [num(v, d), h("br"), h("span", { class: "ci", text: interval(lo, hi, d) })];
    return h("tr", { "data-run-id": r.id, "data-status": r.status },
      h("td", {}, h("span", { class: "swatch", style: `background:${color(r)}` }),
        h("a", { href: `/runs/${r.id}`, text: r.name }),
        fitNote(r)),
      anyTags() ? h("td", { "data-col": "tags" },
        h("span", { class: "chips" }, ...runTags(r).map((t) => tagChip(t, state.tags.includes(t))))) : null,
      ...state.cols.map((k) => h("td", { "data-col": `recipe:${k}` },
        h("code", { text: recipeValue(r, k) === undefined ? "—" : JSON.stringify(recipeValue(r, k)) }))),
      h("td", {}, badge(r.status)),
      h("td", { class: "num" }, budget),
      h("td", { class: "num", "data-col": "A" }, f.A === null ? "—" : [...withCi(f.A, f.A_lo, f.A_hi, 3),
        f.ceiling_identified ? null : h("span", { class: "ci", "data-unidentified": "1", text: " not identified" })]),
      h("td", { class: "num" }, f.B === null ? "—" : withCi(f.B, f.B_lo, f.B_hi, 2)),
      h("td", { class: "num" }, f.C_mid === null ? "—" : [compact(f.C_mid), h("br"),
        h("span", { class: "ci", text: f.C_mid_lo === null ? "" : `[${compact(f.C_mid_lo)}, ${compact(f.C_mid_hi)}]` })]),
      h("td", { class: "num", "data-col": "at_budget" }, atB),
      h("td", { "data-col": "recommendation" }, rec ? [badge(rec.action), h("span", { class: "rec-reason", "data-rule": rec.rule || null, text: rec.reason }), seen]
        : h("span", { class: "ci", text: S.statusIs("finished", r.status) ? "finished: no advice" : "—" })),
      h("td", { class: "actions-cell" }, S.runActions(r, refreshSoon)));
  }

  // The runs table: sortable by any column (a click or Enter on its header), with a column per chosen recipe key
  // among those that vary in the grid ("Columns").
  const COLUMNS = [["name", "Run", ""], ["status", "Status", ""], ["compute", "Compute / budget", "num"],
    ["A", "A (ceiling)", "num"], ["B", "B", "num"], ["C_mid", "C_mid", "num"], ["at_budget", "At budget", "num"],
    ["recommendation", "Recommendation", ""]];
  function sortValue(r, key) {
    const rec = state.recs.get(r.id);
    const f = decidedFit(r);
    if (key === "name") return r.name;
    if (key === "status") return r.status;
    if (key === "compute") return r.compute_used;
    if (key === "at_budget") return f.at_budget ? f.at_budget.mean : null;
    if (key === "recommendation") return rec ? rec.action : null;
    if (key === "tags") return runTags(r).length ? runTags(r).join(" ") : null;
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
  // `config.<name>`: the run's own config (runs you train yourself describe themselves there).
  function recipeValue(r, key) {
    const run = runRecord(r);
    if (key.startsWith("config.")) return run && run.config ? run.config[key.slice(7)] : undefined;
    if (key.startsWith("summary.")) return run && run.summary ? run.summary[key.slice(8)] : undefined;
    let v = run && run.recipe ? run.recipe : null;
    for (const part of key.split(".")) v = v && typeof v === "object" ? v[part] : undefined;
    return v === undefined ? r.overrides[key] : v;
  }
  // The keys a run can differ by: its recipe overrides, its own config (`config.<name>`) and summary (`summary.<name>`).
  function settingKeys(runs) {
    const configs = ((state.exp && state.exp.runs) || []).flatMap((r) => [
      ...Object.keys(r.config || {}).map((k) => `config.${k}`), ...Object.keys(r.summary || {}).map((k) => `summary.${k}`)]);
    return [...new Set([...runs.flatMap((r) => Object.keys(r.overrides)), ...configs])].sort();
  }
  function varyingKeys() {
    const runs = state.chart.runs;
    const keys = settingKeys(runs);
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
    const cols = [COLUMNS[0], ...(anyTags() ? [["tags", "Tags", ""]] : []), ...state.cols.map((k) => [`recipe:${k}`, k, ""]),
      ...COLUMNS.slice(1)];
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
      .filter((r) => !filter || r.name.toLowerCase().includes(filter) || r.status.includes(filter)
        || runTags(r).some((t) => t.toLowerCase().includes(filter)))
      .filter((r) => state.tags.every((t) => runTags(r).includes(t)));
    if (state.sort.key) {
      const { key, dir } = state.sort;
      runs = [...runs].sort((a, b) => {
        const va = sortValue(a, key), vb = sortValue(b, key);
        if (va === null || va === undefined || vb === null || vb === undefined) return compare(va, vb);
        return dir * compare(va, vb);
      });
    }
    columnPicker();
    tagFilter();
    tableHead();
    document.querySelector("#runs tbody").replaceChildren(...runs.map(runRow));
    writeView();
  }

  // Parallel coordinates: the varied recipe keys against the forecast at budget and A of the table's fit.
  function parallel() {
    const rows = state.chart.runs.map((r) => {
      const f = decidedFit(r);
      return { id: r.id, name: r.name, values: Object.fromEntries(state.varying.map((k) => [k, recipeValue(r, k)])),
        V: f.at_budget ? f.at_budget.mean : null, A: f.A };
    });
    Parcoords.draw(document.getElementById("parcoords"), document.getElementById("parcoords-note"), rows,
      state.varying);
  }

  // The verdict banner: the assessment's verdict (the same fits and decisions as the table below), with its version.
  function drawVerdict() {
    const node = document.getElementById("verdict");
    const a = state.assessment;
    if (!a) { node.hidden = true; return; }
    const v = a.verdict;
    const open = v.finished ? "Not decided" : "Not decided yet";
    const head = v.best_run_name
      ? `${v.decided ? "Decided" : (v.finished ? "Best so far" : "Leading")}: ${v.best_run_name}`
        + (v.basis !== "none" ? ` (by ${v.basis === "observed" ? "observation" : "forecast"})` : "")
      : (v.decided ? "Decided" : open);
    const best = v.ranking.find((r) => r.run_id === v.best_run_id);
    node.replaceChildren(...[h("strong", { text: head }), " ",
      best && best.V_budget !== null ? h("span", { "data-best-run": best.run_id, "data-v-budget": best.V_budget,
        text: `${best.observed ? "ended at" : "forecasts"} ${num(best.V_budget)} at the budget; ` }) : null,
      v.difference_at_budget !== null ? h("span", { text: `${num(v.difference_at_budget)} above ${v.runner_up_name}` + (v.confidence !== null ? `, P = ${num(v.confidence, 2)}` : "") + ". " }) : null,
      h("span", { class: "muted", text: v.reason }), " ",
      h("span", { class: "as-of", id: "verdict-as-of", "data-agrees": "yes",
        text: a.version ? `assessment v${a.version} of ${S.when(a.computed_at)}: the table's numbers` : "not assessed yet" }),
      workSpread(v.work_spread),
      ablations(v.ablations || []),
    ].filter((c) => c !== null));
    node.className = "verdict " + (v.decided ? "decided" : "open");
    node.hidden = false;
    drawBandNote(a.adaptive_band);
  }

  // The runs' steps per compute unit differ more than the policy allows: the assessment's warning, as it says it.
  function workSpread(w) {
    if (!w) return null;
    const held = w.robust === false ? " The verdict is not decided on it: the lead does not hold at equal work." : "";
    return h("p", { class: "verdict-warning", id: "verdict-work-spread", "data-ratio": w.ratio,
      text: `Warning: ${w.warning}.${held}` });
  }

  // A leave-one-out grid's own question: each removed component against the base recipe (the verdict's lines).
  function ablations(items) {
    if (!items.length) return null;
    return h("div", { id: "verdict-ablations" },
      h("span", { text: "Leave-one-out, each removed component against the base recipe at the budget:" }),
      h("ul", {}, ...items.map((x) => h("li", { "data-component": x.component, "data-finding": x.finding,
        class: x.finding === "costs" ? "ablation-loss" : null, text: x.text }))));
  }

  // The experiment's adaptive band (fit.adaptive_band): what the assessment did to every run's band, in its words.
  function drawBandNote(band) {
    const node = document.getElementById("band-note");
    node.hidden = !band;
    node.textContent = band ? `Adaptive band: ${band.note}.` : "";
    if (band) node.dataset.scale = band.scale;
  }

  function drawComparison() {
    const out = state.assessment.comparison;
    const note = out.reference_name
      ? `Each run against ${out.reference_kind === "base" ? "the leave-one-out base" : "the run with the highest ceiling"}`
        + ` (${out.reference_name}). Ceilings more than ±${out.margin} apart (with P ≥ 0.9) differ in ceiling A;`
        + " otherwise the run is more or less efficient when it reaches half its gain at less or more compute"
        + " (C_mid, P ≥ 0.9). A ceiling not identified yet is never compared."
      : "Needs at least one run with a usable fit.";
    document.getElementById("ceff-note").textContent = note + (out.skipped ? ` ${out.skipped} runs not compared.` : "");
    const a = state.assessment;
    document.getElementById("ceff-as-of").textContent = a.version
      ? `assessment v${a.version} of ${S.when(a.computed_at)}; the runs table's fits (${out.fit}): A and ΔA are the table's`
      : "not assessed yet";
    const byId = new Map(state.chart.runs.map((r) => [r.id, r]));
    const label = { ceiling: "ceiling", efficiency: "efficiency", not_shown: "not shown to differ", none: "no difference",
      unknown: "not yet" };
    const arrow = { better: " ↑", worse: " ↓", same: "", unknown: "" };
    const rows = out.rows.map((c) => {
      const r = byId.get(c.run_id);
      const change = Object.entries(c.changes).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ") || "(same recipe and config)";
      return h("tr", {},
        h("td", {}, r ? h("span", { class: "swatch", style: `background:${color(r)}` }) : null,
          h("a", { href: `/runs/${c.run_id}`, text: c.run_name })),
        h("td", {}, h("code", { text: change })),
        h("td", {}, badge(`${c.effect}-${c.direction}`, label[c.effect] + arrow[c.direction])),
        h("td", { class: "num", "data-col": "A_diff", text: c.A_diff === null ? "—" : (c.A_diff >= 0 ? "+" : "") + num(c.A_diff) }),
        h("td", { class: "num", text: num(c.probability_higher, 2) }),
        h("td", { class: "reason", text: c.reason }));
    });
    document.querySelector("#comparison tbody").replaceChildren(...rows);
  }

  async function refresh() {
    try {
      await loadChart();
      drawChart();
      asOf();
      chips();
      rankings();
      state.varying = varyingKeys();
      runsTable();
      parallel();
      drawVerdict();
      drawComparison();
      S.banner("");
    } catch (err) {
      S.banner(`Could not load the experiment: ${S.errorText(err)}`);
    }
  }
  const refreshSoon = S.debounce(refresh, 250, 1000);
  const loadAlerts = () => Alerts.fill(document.querySelector("#alerts tbody"),
    new URLSearchParams({ experiment_id: String(id), limit: "10" }), document.getElementById("alerts-empty")).catch(() => {});
  const loadScorecard = () => Scorecard.load(id).catch(() => {});
  const slowSoon = S.debounce(() => { loadAlerts(); loadScorecard(); }, 500, 5000);

  function onEvent(type) {
    refreshSoon();
    if (type === "assessment" || type === "status" || type === "run_created") slowSoon();
    if (type === "run_created") runsSoon();  // a new run's tags and config are in the experiment answer only
  }
  const runsSoon = S.debounce(() => loadExperiment().then(() => { if (state.chart) runsTable(); }).catch(() => {}),
    500, 5000);

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
    state.tags = [...new Set(q.getAll("tag").filter(Boolean))];
  }
  function writeView() {
    const q = new URLSearchParams();
    for (const [k, v] of new URLSearchParams(location.search)) if (k.startsWith("cmp_")) q.append(k, v);  // Compare's
    if (state.highlight !== 8) q.set("highlight", String(state.highlight));
    const filter = document.getElementById("run-filter").value.trim();
    if (filter) q.set("filter", filter);
    if (state.sort.key) q.set("sort", (state.sort.dir < 0 ? "-" : "") + state.sort.key);
    for (const c of state.cols) q.append("col", c);
    for (const t of state.tags) q.append("tag", t);
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
    const keys = settingKeys(runs);
    const rows = runs.map((r) => {
      const rec = state.recs.get(r.id);
      const f = decidedFit(r);
      const row = { id: r.id, name: r.name, status: r.status, compute_used: r.compute_used, budget: r.budget,
        A: f.A, A_lo: f.A_lo, A_hi: f.A_hi, B: f.B, C_mid: f.C_mid,
        at_budget: f.at_budget ? f.at_budget.mean : null, at_budget_lo: f.at_budget ? f.at_budget.lo : null,
        at_budget_hi: f.at_budget ? f.at_budget.hi : null, recommendation: rec ? rec.action : null,
        reason: rec ? rec.reason : null, tags: runTags(r).join(" ") };
      for (const k of keys) row[`recipe:${k}`] = recipeValue(r, k);
      return row;
    });
    const columns = [["id", "run_id"], ["name", "name"], ["status", "status"], ["tags", "tags"],
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
    Export.json({ experiment: state.exp, chart: state.chart, assessment: state.assessment },
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
    loadAlerts();
    loadScorecard();
    document.getElementById("alerts-link").href = `/alerts?experiment_id=${id}`;
    Compare.init(id, state.chart.runs, palette);
    const live = document.getElementById("live");
    state.stream = S.stream(`/api/v1/experiments/${id}/events`, state.chart.last_event_id, onEvent,
      (on) => S.liveState(live, on));
  })();
})();

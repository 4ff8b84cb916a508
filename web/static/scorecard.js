// The experiment page's scorecard: what the decisions did on this grid (GET /api/v1/experiments/{id}/scorecard),
// read from the stored assessment and the moments recorded as each was stored; nothing here computes a number.
// Every value is put in the page as text (h()'s text / children), never as HTML.
"use strict";

const Scorecard = (() => {
  const { api, h, num, compact } = S;
  const pct = (v) => (v === null || v === undefined || !Number.isFinite(v) ? "—" : `${Math.round(v * 100)}%`);
  const interval = (f) => (f.lo === null || f.hi === null ? "" : ` [${num(f.lo)}, ${num(f.hi)}]`);

  function verdictLine(card) {
    const first = card.first_decided;
    if (!first) return card.best_run_name ? `Not decided yet (leading: ${card.best_run_name}).` : "Not decided yet.";
    const head = `First decided at ${pct(first.share_of_budget)} of the grid's budget`
      + ` (${compact(first.spent)} ${card.compute_unit} spent): ${first.best_run_name}`;
    if (!card.changes.length) return `${head}; unchanged since.`;
    const later = card.changes.map((c) => (c.decided ? `${c.best_run_name} at ${pct(c.share_of_budget)}`
      : `undecided again at ${pct(c.share_of_budget)}`)).join(", then ");
    return `${head}; then ${later}.`;
  }

  function forecastCell(f, against) {
    if (!f || f.value === null) return "—";
    const text = `${num(f.value)}${interval(f)}`;
    if (against === null || against === undefined) return text;
    const inside = f.inside === null ? "" : f.inside ? " · inside its band" : " · outside its band";
    return `${text} · error ${f.error >= 0 ? "+" : ""}${num(f.error)}${inside}`;
  }

  function runRow(g) {
    const early = (m) => forecastCell(g.early.find((f) => f.milestone === m), g.final_value);
    const stop = g.stop_forecast;
    const cells = g.stop_forecast
      ? [`stopped at ${pct(stop.share)} of its budget, having shown ${num(g.last_value)}; its forecast then: `
        + `${forecastCell(stop, null)} at the budget`, "—", "—"]
      : g.final_value !== null ? [`ended at ${num(g.final_value)}`, early(0.3), early(0.5)] : ["—", "—", "—"];
    return h("tr", { "data-run-id": g.run_id, "data-status": g.status },
      h("td", {}, h("a", { href: `/runs/${g.run_id}`, text: g.run_name })),
      h("td", {}, S.badge(g.status)),
      h("td", { class: "num", "data-col": "saved", text: g.saved ? compact(g.saved) : "—" }),
      ...cells.map((c, k) => h("td", { "data-col": ["outcome", "at30", "at50"][k], text: c })));
  }

  function draw(card) {
    const unit = card.compute_unit;
    document.getElementById("scorecard-summary").replaceChildren(h("strong", { text: card.summary }));
    const saved = document.getElementById("scorecard-saved");
    saved.textContent = `Against running every run to its budget (${compact(card.budget)} ${unit}): `
      + `${compact(card.compute_used)} ${unit} used, ${compact(card.saved)} ${unit} (${pct(card.saved_share)}) `
      + "saved by the runs stopped.";
    saved.dataset.saved = card.saved;
    saved.dataset.share = card.saved_share === null ? "" : card.saved_share;
    const verdict = document.getElementById("scorecard-verdict");
    verdict.textContent = verdictLine(card);
    verdict.dataset.best = card.first_decided ? card.first_decided.best_run_name : "";
    const alerts = Object.entries(card.alerts);
    document.getElementById("scorecard-alerts").textContent = alerts.length
      ? `Alerts raised: ${alerts.map(([k, n]) => `${k.replaceAll("_", " ")} ×${n}`).join(", ")}.` : "No alerts raised.";
    document.querySelector("#scorecard-runs tbody").replaceChildren(...card.runs.map(runRow));
    document.getElementById("scorecard-as-of").textContent = card.assessment_version
      ? `assessment v${card.assessment_version}${card.finished ? "; every run finished" : "; runs still live"}`
      : "not assessed yet";
  }

  async function load(experimentId) {
    draw(await api(`/api/v1/experiments/${experimentId}/scorecard`));
  }

  return { load, draw };
})();

// The terms of the stop rules, explained where they are used: every recommendation reason, verdict reason and
// alert message on the page gets its rule terms (η, rung, floored, hold, dominated, ...) marked with a one-line
// explanation (a tooltip on hover and on keyboard focus; a click opens the page's "Terms" block at that term).
// One dictionary, true to docs/decisions.md and rl_core/scaling (grid_decisions.py, rungs.py, fallen.py,
// equal_compute_stops.py, recommend.py). Numbers in brackets are the policy's defaults; an experiment's own policy
// may set others.
"use strict";

const Glossary = (() => {
  // key: [term as listed, explanation, pattern that finds it in a reason]. Order: the order of the "Terms" block.
  const TERMS = [
    ["leader", "leader",
      "The run with the highest value at the budget: its median forecast while it trains (a ceiling on the A = 1 bound "
      + "included), its observed value once it reached its budget or finished. It is the verdict's best run, and no "
      + "rule stops it.",
      /\bthe leader\b|\bleader\b|\bbest of \d+ runs\b/i],
    ["dominated", "dominated",
      "Another recipe's run beats it at the budget: P(its value < the other's − value_margin [0.01]) ≥ "
      + "p_stop [0.9], from both runs' posterior draws of the value at the budget.",
      /\bdominated\b/i],
    ["cannot_matter", "cannot matter",
      "Even optimistically, keeping the run buys less than min_expected_gain [0.004] over the leader (the best run "
      + "of another recipe): E[max(its value − the leader's, 0)] at the budget is below it; both ceilings must be "
      + "identified.",
      /\bcannot matter\b|\bcannot_matter\b/i],
    ["behind", "behind (at equal compute)",
      "Its mean over its last 2 evaluations trails another run's observed curve at the same compute by more than "
      + "0.02 + 2.5 × the grid's evaluation noise; no forecast is used, and the forecast leader or a run whose own "
      + "forecast catches up is kept.",
      /\bbehind at equal compute\b|\bbehind\b/i],
    ["rung", "rung (successive halving)",
      "A checkpoint at a fixed fraction of the budget (1/9 and 1/3 for η = 3): each recipe stands at its observed "
      + "value there (the mean of its seeds), and only the top 1/η of the recipes go on.",
      /\bsuccessive halving\b|\brungs?\b/i],
    ["compute_target", "compute target",
      "The one knob that trades compute for risk (policy compute_target, off by default: the rules alone, as at "
      + "0.5): below 0.5, runs ranked below a shrinking share of the grid, by value at the budget, are stopped so "
      + "that the grid spends about that fraction of its compute (the leader never); above it, every stop waits "
      + "until a run has used more of its budget.",
      /\bcompute target\b|\bcompute_target\b/i],
    ["eta", "η (eta)",
      "Successive halving's reduction factor (rung.eta [3]): rungs sit at η⁻ᵏ of the budget (1/9 and 1/3 for "
      + "η = 3), and at each rung only the top max(1, n // η) of the n recipes go on.",
      /η/],
    ["seed_spread", "seed spread",
      "The standard deviation between seeds of one recipe at the compute compared; a gap between runs or recipes "
      + "must also exceed seed_z [2.5] × this spread, so the rules never rank seeds of one recipe.",
      /\bseed spread\b|\bseed_spread\b/i],
    ["floored", "floored at its recent level",
      "The fitted curve never falls, so the run's forecast draws are raised to the mean of its last 3 evaluations: "
      + "a forecast below what the run already shows cannot stop it.",
      /\bfloored at its recent level\b|\bfloored\b/i],
    ["fallen", "fallen (capped at its recent level)",
      "The run's recent level (mean of its last 3 evaluations) is below its peak (best mean of 3 consecutive ones) "
      + "by more than the noise allows, so it is forecast to stay where it is, not to climb back to its peak.",
      /\bcapped at its recent level\b|\bfell [\d.]+ from its peak\b|\bfallen\b/i],
    ["hold", "hold (pending confirmation)",
      "A stop must hold on 2 consecutive evaluations (hold [2]): the decision is made again without the run's "
      + "newest evaluation, and only when both say stop is it a stop; until then it reads \"pending confirmation\".",
      /\bpending confirmation\b|\bhold\b/i],
    ["too_early", "too early",
      "No stop by the forecast or the grid rules before the run has used min_fraction [10%] of its budget; until "
      + "then such a stop is shown as \"would stop, but only …\".",
      /\bwould stop, but only\b|\btoo early\b|\btoo_early\b/i],
    ["plateau", "plateau",
      "The rest of the budget is forecast to buy less than min_gain [0.01] even at the optimistic end; in a grid a "
      + "plateau alone never stops a run (it says nothing about being the best one).",
      /\bplateau(?:ed)?\b/i],
    ["unidentified", "unidentified (ceiling not identified)",
      "Identified means one thing everywhere: the fitted ceiling A is off the A = 1 bound, inside its own interval, "
      + "and that interval is at most max_ceiling_width [0.25] wide. A ceiling not identified is never compared as a "
      + "number; its own forecast advises only \"collect more points\" (the grid rules may still stop it, and it "
      + "can still lead by its value at the budget).",
      /\bnot identified\b|\bunidentified\b/i],
  ];
  const BY_KEY = new Map(TERMS.map(([key, term, text, re]) => [key, { key, term, text, re }]));
  // Rule names (a recommendation's `rule`) to the term that explains them.
  const RULES = { leader: "leader", dominated: "dominated", cannot_matter: "cannot_matter", behind: "behind",
    rung: "rung", compute_target: "compute_target", pending: "hold", resume_pending: "hold", too_early: "too_early",
    plateau: "plateau", unidentified: "unidentified" };
  // Where reasons are shown: recommendation and alert reasons, the verdict's reason, the comparison's "Why".
  const TARGETS = ".rec-reason, .table td.reason, #verdict .muted, [data-glossary]";

  function explain(key) {
    const t = BY_KEY.get(RULES[key] || key);
    return t ? t.text : null;
  }

  function mark(t, text) {
    return S.h("abbr", { class: "term", "data-term": t.key, title: `${t.term}: ${t.text}`, tabindex: "0",
      text, onclick: () => openLegend(t.key), onkeydown: (e) => { if (e.key === "Enter") openLegend(t.key); } });
  }

  // The node's text with the first mention of each term marked (the text itself is unchanged: text nodes only,
  // never HTML, since reasons carry run names). A rule named in `data-rule` but not mentioned gets a "?" mark.
  function annotate(node) {
    const text = node.textContent;
    if (node.dataset.glossed === text) return;
    const hits = [];
    for (const t of BY_KEY.values()) {
      const m = t.re.exec(text);
      if (m && !hits.some((h) => m.index < h.end && m.index + m[0].length > h.start)) {
        hits.push({ t, start: m.index, end: m.index + m[0].length });
      }
    }
    const rule = BY_KEY.get(RULES[node.dataset.rule] || node.dataset.rule);
    if (!hits.length && !rule) { node.dataset.glossed = text; return; }
    hits.sort((a, b) => a.start - b.start);
    const parts = [];
    let at = 0;
    for (const hit of hits) {
      parts.push(text.slice(at, hit.start), mark(hit.t, text.slice(hit.start, hit.end)));
      at = hit.end;
    }
    parts.push(text.slice(at));
    node.replaceChildren(...parts.filter((p) => p !== ""));
    if (rule && !hits.some((h) => h.t === rule)) {
      const q = mark(rule, "?");
      q.classList.add("term-q");
      q.setAttribute("aria-label", `${rule.term}: ${rule.text}`);
      node.append(" ", q);
    }
    node.dataset.glossed = node.textContent;
  }

  function annotateAll(root = document) {
    for (const node of root.querySelectorAll(TARGETS)) if (!node.closest(".terms")) annotate(node);
  }

  // The "Terms" block: every term with its sentence, in a <details> the page places where it wants it.
  function legend(node) {
    node.replaceChildren(S.h("details", { class: "terms" },
      S.h("summary", { text: "Terms used in the recommendations (η, rung, floored, hold, …)" }),
      S.h("dl", {}, ...TERMS.flatMap(([key, term, text]) => [
        S.h("dt", { id: `term-${key}`, tabindex: "-1", text: term }), S.h("dd", { text })]))));
  }
  function openLegend(key) {
    const details = document.querySelector("[data-glossary-legend] details.terms");
    const dt = document.getElementById(`term-${key}`);
    if (!details || !dt) return;
    details.open = true;
    for (const d of details.querySelectorAll("dt.active")) d.classList.remove("active");
    dt.classList.add("active");
    dt.scrollIntoView({ block: "center" });
    dt.focus({ preventScroll: true });
  }

  // Pages fill their reasons whenever data arrives: mark them as they appear (one pass per batch of changes).
  let queued = false;
  function start() {
    for (const node of document.querySelectorAll("[data-glossary-legend]")) legend(node);
    annotateAll();
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; annotateAll(); });
    }).observe(document.querySelector("main") || document.body, { childList: true, subtree: true, characterData: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();

  return { TERMS: BY_KEY, RULES, explain, annotate, annotateAll };
})();

// The experiments list: status, runs, compute, best forecast ceiling and recommendations; refreshed every 10 s.
"use strict";

(() => {
  const { api, h, num, compact, interval, badge, when } = S;

  const SEVERITY = { error: "failed", warning: "stopping", info: "queued" };
  function alerts(e) {
    const items = Object.entries(e.alerts).filter(([, n]) => n > 0)
      .map(([sev, n]) => h("a", { href: `/alerts?experiment_id=${e.id}` }, badge(SEVERITY[sev] || "queued", `${n} ${sev}`)));
    return items.length ? items : [h("span", { class: "ci", text: "—" })];
  }

  function row(e) {
    const statuses = Object.entries(e.status_counts).map(([s, n]) => badge(s, `${n} ${s}`));
    const recs = Object.entries(e.recommendations).filter(([, n]) => n > 0)
      .map(([a, n]) => badge(a, `${n} ${a.replace("_", " ")}`));
    return h("tr", { "data-experiment-id": e.id },
      h("td", {}, h("a", { href: `/experiments/${e.id}`, text: e.name }),
        e.description ? h("span", { class: "rec-reason", text: e.description }) : null),
      h("td", { text: [e.task, e.model].filter(Boolean).join(" · ") }),
      h("td", {}, h("div", { class: "chips" }, `${e.n_runs} `, ...statuses)),
      h("td", { class: "num", text: `${compact(e.compute_used)} / ${compact(e.total_budget)} ${e.compute_unit}` }),
      h("td", {}, e.best ? [h("strong", { text: num(e.best.A) }), " ", h("span", { class: "ci", text: interval(e.best.A_lo, e.best.A_hi) }),
        h("span", { class: "rec-reason" }, h("a", { href: `/runs/${e.best.run_id}`, text: e.best.run_name }))]
        : e.ceiling_note ? [h("span", { class: "ci", text: "leaders still rising" }),
          h("span", { class: "rec-reason", "data-ceiling-note": "", text: e.ceiling_note })]
        : h("span", { class: "ci", text: "no fit yet" })),
      h("td", {}, h("div", { class: "chips" }, ...(recs.length ? recs : [h("span", { class: "ci", text: "—" })]))),
      h("td", {}, h("div", { class: "chips" }, ...alerts(e))),
      h("td", { text: when(e.created_at) }));
  }

  async function load() {
    try {
      const list = await api("/api/v1/dashboard/experiments");
      document.querySelector("#experiments tbody").replaceChildren(...list.map(row));
      document.getElementById("empty").hidden = list.length > 0;
      S.banner("");
    } catch (err) {
      if (err.status !== 401) S.banner(`Could not load experiments: ${S.errorText(err)}`);
    }
  }
  load();
  setInterval(load, 10000);
})();

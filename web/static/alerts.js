// The alerts page (and alerts cards on experiment and run pages): stored alerts with their deliveries.
"use strict";

const Alerts = (() => {
  const { api, h, badge, when } = S;
  const SEVERITY = { error: "failed", warning: "stopping", info: "queued" };

  function deliveries(a) {
    if (a.suppressed) return [h("span", { class: "ci", text: "suppressed (rate limit)" })];
    if (!a.deliveries.length) return [h("span", { class: "ci", text: "no channel" })];
    return a.deliveries.map((d) => h("div", {}, badge(d.status === "sent" ? "succeeded" : d.status === "failed" ? "failed" : "queued",
      `${d.channel} ${d.status}`), d.last_error ? h("span", { class: "rec-reason", text: d.last_error }) : null));
  }

  function row(a) {
    const where = [];
    if (a.experiment_id) where.push(h("a", { href: `/experiments/${a.experiment_id}`, text: `experiment ${a.experiment_id}` }));
    if (a.run_id) where.push(" · ", h("a", { href: `/runs/${a.run_id}`, text: `run ${a.run_id}` }));
    return h("tr", { "data-alert-id": a.id },
      h("td", { text: when(a.last_seen_at) }),
      h("td", {}, badge(SEVERITY[a.severity] || "queued", a.severity)),
      h("td", {}, h("strong", { text: a.title }), h("span", { class: "rec-reason", text: a.message }),
        // Advice a later assessment withdrew stays listed, marked with what it advises now.
        a.resolved_at ? h("span", { class: "rec-reason", "data-resolved": "1" }, badge("stopped", "withdrawn"),
          ` ${when(a.resolved_at)}: ${a.resolution || ""}`) : null),
      h("td", {}, ...(where.length ? where : ["—"])),
      h("td", { class: "num", text: String(a.count) }),
      h("td", {}, ...deliveries(a)));
  }

  async function fill(tbody, query, empty) {
    const list = await api(`/api/v1/alerts?${query}`);
    tbody.replaceChildren(...list.map(row));
    if (empty) empty.hidden = list.length > 0;
    return list;
  }
  return { fill, row };
})();

if (document.body.dataset.page === "alerts") {
  (() => {
    const form = document.getElementById("alert-filter");
    const params = new URLSearchParams(location.search);
    form.experiment_id.value = params.get("experiment_id") || "";
    form.type.value = params.get("type") || "";
    const load = async () => {
      const q = new URLSearchParams({ limit: "200" });
      if (form.experiment_id.value) q.set("experiment_id", form.experiment_id.value);
      if (form.type.value) q.set("type", form.type.value);
      try {
        await Alerts.fill(document.querySelector("#alerts tbody"), q, document.getElementById("empty"));
        S.banner("");
      } catch (err) {
        if (err.status !== 401) S.banner(`Could not load alerts: ${S.errorText(err)}`);
      }
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      if (form.experiment_id.value) q.set("experiment_id", form.experiment_id.value);
      if (form.type.value) q.set("type", form.type.value);
      history.replaceState(null, "", `/alerts${q.toString() ? "?" + q : ""}`);
      load();
    });
    load();
    setInterval(load, 10000);
  })();
}

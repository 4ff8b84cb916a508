// Settings: the browser's API token (local storage) and, for admin tokens, token management.
"use strict";

(() => {
  const { api, h, when } = S;
  const state = document.getElementById("signin-state");

  async function check() {
    if (!S.token()) {
      state.textContent = "No token saved: pages show data only if the server allows open reads.";
      return false;
    }
    let me;
    try {
      me = await api("/api/v1/tokens/current");
    } catch (err) {
      state.textContent = `This token does not work here: ${S.errorText(err)}`;
      return false;
    }
    const can = { read: "read", write: "read and act on runs (submit, stop, resume, extend, retry)",
      admin: "read, act on runs, and manage tokens and webhooks" };
    const top = me.scopes[me.scopes.length - 1];
    state.replaceChildren("Signed in with token ", h("strong", { text: me.name }), " · scope ",
      h("strong", { id: "token-scope", text: top }), `: it can ${can[top]}.`);
    return true;
  }

  async function tokens() {
    const table = document.getElementById("tokens");
    const create = document.getElementById("token-create");
    try {
      const list = await api("/api/v1/tokens");
      document.getElementById("tokens-note").textContent = "Tokens of this server (secrets are stored only as hashes).";
      create.hidden = false;
      table.hidden = false;
      table.querySelector("tbody").replaceChildren(...list.map((t) => h("tr", {},
        h("td", { text: t.name }), h("td", {}, h("code", { text: `${t.prefix}…` })), h("td", { text: t.scopes.join(", ") }),
        h("td", { text: when(t.created_at) }), h("td", { text: t.revoked_at ? `revoked ${when(t.revoked_at)}` : "active" }),
        h("td", {}, t.revoked_at ? null : h("button", { class: "btn small danger", type: "button", text: "Revoke",
          "aria-label": `Revoke token ${t.name}`, onclick: async () => {
            const ok = await S.confirm({ title: `Revoke ${t.name}?`, danger: true, okText: "Revoke",
              text: "Anything using this token loses access at once." });
            if (ok) { await api(`/api/v1/tokens/${t.id}`, { method: "DELETE" }); tokens(); }
          } })))));
    } catch (err) {
      create.hidden = true;
      table.hidden = true;
      document.getElementById("tokens-note").textContent = err.status === 403 || err.status === 401
        ? "Listing and creating tokens needs an admin token." : `Could not list tokens: ${S.errorText(err)}`;
    }
  }

  async function hooks() {
    const table = document.getElementById("hooks");
    const create = document.getElementById("hook-create");
    const result = document.getElementById("hook-test-result");
    try {
      const list = await api("/api/v1/alerts/webhooks");
      document.getElementById("hooks-note").textContent =
        "Alerts are posted to these URLs, signed with HMAC-SHA256 (the secret is shown once, when a webhook is added).";
      create.hidden = false;
      table.hidden = false;
      table.querySelector("tbody").replaceChildren(...list.map((w) => h("tr", { "data-webhook-id": w.id },
        h("td", { text: w.name }), h("td", {}, h("code", { text: w.url })), h("td", { text: w.format }),
        h("td", { text: (w.events.length ? w.events.join(", ") : "all") + (w.experiment_id ? ` (experiment ${w.experiment_id})` : "") }),
        h("td", { text: w.enabled ? "enabled" : "disabled" }),
        h("td", { class: "actions-cell" },
          h("button", { class: "btn small", type: "button", text: "Send test", "aria-label": `Send a test alert to ${w.name}`,
            onclick: async () => {
              result.textContent = `Sending a test alert to ${w.name}…`;
              try {
                const out = await api(`/api/v1/alerts/webhooks/${w.id}/test`, { method: "POST" });
                result.textContent = out.ok ? `${w.name}: delivered (HTTP ${out.status_code}).`
                  : `${w.name}: not delivered${out.status_code ? ` (HTTP ${out.status_code})` : ""}: ${out.error}`;
              } catch (err) {
                result.textContent = `${w.name}: ${S.errorText(err)}`;
              }
            } }),
          h("button", { class: "btn small danger", type: "button", text: "Delete", "aria-label": `Delete webhook ${w.name}`,
            onclick: async () => {
              const ok = await S.confirm({ title: `Delete ${w.name}?`, danger: true, okText: "Delete",
                text: "Alerts stop going to this URL; stored alerts stay." });
              if (ok) { await api(`/api/v1/alerts/webhooks/${w.id}`, { method: "DELETE" }); hooks(); }
            } })))));
    } catch (err) {
      create.hidden = true;
      table.hidden = true;
      document.getElementById("hooks-note").textContent = err.status === 403 || err.status === 401
        ? "Managing webhooks needs an admin token." : `Could not list webhooks: ${S.errorText(err)}`;
    }
  }

  // A create form (#formId, its error #formId-error): POST body(form) to url, show the answer's one-time secret
  // (secretOf(out)) in #secretId-value, then list again.
  function createForm(formId, url, body, secretId, secretOf, relist) {
    document.getElementById(formId).addEventListener("submit", async (e) => {
      e.preventDefault();
      const form = e.target;
      const err = document.getElementById(`${formId}-error`);
      err.hidden = true;
      try {
        const out = await api(url, { method: "POST", body: body(form) });
        document.getElementById(`${secretId}-value`).textContent = secretOf(out);
        document.getElementById(secretId).hidden = false;
        form.reset();
        relist();
      } catch (ex) {
        err.textContent = S.errorText(ex);
        err.hidden = false;
      }
    });
  }

  createForm("hook-create", "/api/v1/alerts/webhooks",
    (form) => ({ name: form.name.value.trim(), url: form.url.value.trim(), format: form.format.value }),
    "hook-secret", (out) => out.secret, hooks);

  document.getElementById("signin").addEventListener("submit", async (e) => {
    e.preventDefault();
    const field = document.getElementById("token");
    S.setToken(field.value.trim());
    field.value = "";
    if (await check()) { tokens(); hooks(); }
  });
  document.getElementById("signout").addEventListener("click", () => { S.setToken(""); check(); tokens(); hooks(); });
  createForm("token-create", "/api/v1/tokens", (form) => ({ name: form.name.value.trim(), scopes: [form.scope.value] }),
    "new-secret", (out) => out.token, tokens);
  check().then(() => { tokens(); hooks(); });
})();

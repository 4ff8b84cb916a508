// The sign-in page: pages send a browser here when the API answers 401 (no token, or a revoked one). A token
// entered here is checked against the server before it is saved; then the browser goes back where it was.
"use strict";

(() => {
  const form = document.getElementById("signin-form");
  const field = document.getElementById("signin-token");
  const error = document.getElementById("signin-error");
  const reasonNode = document.getElementById("signin-reason");

  // Only a path on this server (never another origin) is a place to go back to. Checked on the parsed URL: browsers
  // read "/\\host" and "/<tab>/host" as "//host", another origin, so a leading single slash proves nothing.
  function next() {
    const target = new URLSearchParams(location.search).get("next") || "/";
    let url;
    try { url = new URL(target, location.origin); } catch (_) { return "/"; }
    if (!target.startsWith("/") || url.origin !== location.origin || url.pathname.startsWith("/signin")) return "/";
    return url.pathname + url.search + url.hash;
  }

  const reason = sessionStorage.getItem("scalerl.signin");
  sessionStorage.removeItem("scalerl.signin");
  if (reason || S.token()) {
    reasonNode.textContent = S.token()
      ? `The token saved in this browser was refused${reason ? ` (${reason})` : ""}. Enter another one.`
      : "No API token is saved in this browser, and this server does not serve pages without one.";
    reasonNode.hidden = false;
  }

  function fail(text) {
    error.textContent = text;
    error.hidden = false;
    field.setAttribute("aria-invalid", "true");
    field.focus();
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = field.value.trim();
    error.hidden = true;
    field.removeAttribute("aria-invalid");
    if (!value) return fail("Paste an API token (it starts with srl_).");
    let res;
    try {
      res = await fetch("/api/v1/tokens/current", { headers: { Authorization: `Bearer ${value}` } });
    } catch (err) {
      return fail(`The server did not answer: ${err && err.message ? err.message : err}`);
    }
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const detail = data && typeof data.detail === "string" ? data.detail : `HTTP ${res.status}`;
      return fail(`This token does not work here: ${detail}.`);
    }
    S.setToken(value);
    location.replace(next());
    return undefined;
  });
  field.focus();
})();

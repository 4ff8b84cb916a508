// Shared browser code: the API token, REST calls, the live event stream, DOM building and formatting.
// Everything user-provided reaches the page through textContent (h() below), never through innerHTML.
"use strict";

const S = (() => {
  const TOKEN_KEY = "scalerl.token";
  // 16 distinguishable colours: every highlighted run gets its own.
  const PALETTE = ["#2458d6", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0b7285", "#a47a00", "#8c6d62",
    "#d6336c", "#15aabf", "#5c940d", "#f59f00", "#862e9c", "#495057", "#ff8787", "#1864ab"];
  const OTHER = "#aab2be";

  // A link such as http://host/#token=srl_... (printed by `scalerl demo`) signs this browser in; the fragment
  // never reaches the server and is removed from the address bar at once. A browser already signed in with a
  // different token is asked first (a link from someone else must not silently swap the identity it acts with).
  let linkToken = "";
  if (location.hash.startsWith("#token=")) {
    let offered = "";
    try { offered = decodeURIComponent(location.hash.slice(7)).trim(); } catch (_) { offered = ""; }
    history.replaceState(null, "", location.pathname + location.search);
    const stored = localStorage.getItem(TOKEN_KEY) || "";
    if (offered && !stored) localStorage.setItem(TOKEN_KEY, offered);
    else if (offered && offered !== stored) linkToken = offered;
  }

  const token = () => localStorage.getItem(TOKEN_KEY) || "";
  function setToken(value) {
    if (value) localStorage.setItem(TOKEN_KEY, value); else localStorage.removeItem(TOKEN_KEY);
    me = null;
    meLoad = null;
    showAuth();
  }

  class ApiError extends Error {
    constructor(status, detail) {
      super(typeof detail === "string" ? detail : JSON.stringify(detail));
      this.status = status;
      this.detail = detail;
    }
  }

  function authHeaders() {
    const t = token();
    return t ? { Authorization: "Bearer " + t } : {};
  }

  // Who this browser is signed in as ({name, anonymous, scopes}), asked once before the page's first call: pages
  // hide actions from a read-only token. No token (or a refused one) on a server without open reads: the sign-in page.
  let me = null;
  let meLoad = null;
  const onSignIn = () => document.body.dataset.page === "signin";
  function toSignIn(reason) {
    if (onSignIn()) return;
    sessionStorage.setItem("scalerl.signin", reason || "");
    location.replace("/signin?next=" + encodeURIComponent(location.pathname + location.search));
  }
  function whoami() {
    if (!meLoad) {
      meLoad = (async () => {
        try {
          const res = await fetch("/api/v1/tokens/current", { headers: authHeaders() });
          const data = await res.json().catch(() => null);
          if (res.status === 401) {
            toSignIn(data && typeof data.detail === "string" ? data.detail : "");
            return null;
          }
          me = res.ok ? data : null;
        } catch (_) {
          me = null;  // the server enforces scopes anyway; the page just shows every control
        }
        showAuth();
        return me;
      })();
    }
    return meLoad;
  }
  const canWrite = () => !me || me.scopes.includes("write");
  const canAdmin = () => !me || me.scopes.includes("admin");

  async function api(path, { method = "GET", body, yaml = false } = {}) {
    await whoami();
    const headers = authHeaders();
    let payload;
    if (body !== undefined) {
      headers["Content-Type"] = yaml ? "application/yaml" : "application/json";
      payload = yaml ? body : JSON.stringify(body);
    }
    const res = await fetch(path, { method, headers, body: payload });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
    if (!res.ok) {
      const err = new ApiError(res.status, data && data.detail !== undefined ? data.detail : data);
      if (res.status === 401 && !onSignIn() && !(me && me.anonymous)) {
        toSignIn(typeof err.detail === "string" ? err.detail : "");
        return new Promise(() => {});  // the page is going away: no error to show on it
      }
      throw err;
    }
    return data;
  }

  // GET /api/v1/experiments/{id} with every page of its runs and their full recipes (the answer pages them:
  // runs_next is the next page; lists carry full recipes only when asked, 256 runs a page).
  async function experimentWithRuns(id) {
    const exp = await api(`/api/v1/experiments/${id}?recipes=true&runs_limit=256`);
    let next = exp.runs_next;
    while (next) {
      const page = await api(next);
      exp.runs = exp.runs.concat(page.runs);
      next = page.runs_next;
    }
    exp.runs_next = null;
    return exp;
  }

  // Server-sent events read with fetch (so the token goes in a header, which EventSource cannot send);
  // reconnects with Last-Event-ID after a drop, so no event is missed or repeated.
  function stream(path, after, onEvent, onState) {
    let lastId = after > 0 ? String(after) : null;
    let stopped = false;
    let ctrl = null;
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    function dispatch(block) {
      let type = "message", data = "", id = null;
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "event") type = value;
        else if (field === "data") data += (data ? "\n" : "") + value;
        else if (field === "id") id = value;
      }
      if (id !== null) lastId = id;
      if (!data) return;
      let parsed = null;
      try { parsed = JSON.parse(data); } catch (_) { return; }
      onEvent(type, parsed);
    }
    (async () => {
      let delay = 1000;
      while (!stopped) {
        ctrl = new AbortController();
        try {
          const headers = { Accept: "text/event-stream", ...authHeaders() };
          if (lastId) headers["Last-Event-ID"] = lastId;
          const res = await fetch(path, { headers, signal: ctrl.signal });
          if (!res.ok) throw new ApiError(res.status, res.statusText);
          onState(true);
          delay = 1000;
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf = (buf + value).replace(/\r\n?/g, "\n");
            let cut;
            while ((cut = buf.indexOf("\n\n")) >= 0) {
              dispatch(buf.slice(0, cut));
              buf = buf.slice(cut + 2);
            }
          }
        } catch (_) {
          if (stopped) return;
        }
        onState(false);
        await sleep(delay);
        delay = Math.min(delay * 2, 15000);
      }
    })();
    return { close() { stopped = true; if (ctrl) ctrl.abort(); } };
  }

  // Run `fn` soon after the last call, at most once per `minMs`.
  function debounce(fn, waitMs, minMs = 0) {
    let timer = null, last = 0;
    return () => {
      clearTimeout(timer);
      const wait = Math.max(waitMs, last + minMs - Date.now());
      timer = setTimeout(() => { last = Date.now(); fn(); }, wait);
    };
  }

  function h(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "style") node.setAttribute("style", v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const color = (index) => PALETTE[index % PALETTE.length];
  // Colours of an experiment's runs: by position when they all fit in the palette (stable as data arrives);
  // otherwise the highlighted runs share out the palette (in run order) and the rest are grey.
  function colors(runs) {
    const out = new Map();
    if (runs.length <= PALETTE.length) {
      for (const r of runs) out.set(r.id, color(r.index));
      return out;
    }
    let k = 0;
    for (const r of [...runs].sort((a, b) => a.index - b.index)) out.set(r.id, r.highlighted ? color(k++) : OTHER);
    return out;
  }
  const num = (v, d = 3) => (v === null || v === undefined || !Number.isFinite(v) ? "—" : Number(v).toFixed(d));
  function compact(v) {
    if (v === null || v === undefined || !Number.isFinite(v)) return "—";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-2)) return Number(v).toExponential(2);
    if (a !== 0 && a < 1) return String(Number(Number(v).toPrecision(3)));
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: a >= 100 ? 0 : 2 });
  }
  const interval = (lo, hi, d = 3) => (lo === null || lo === undefined || hi === null || hi === undefined
    ? "" : `[${num(lo, d)}, ${num(hi, d)}]`);
  function when(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return d.toLocaleString("en-GB", { year: "numeric", month: "short", day: "2-digit", hour: "2-digit",
      minute: "2-digit", second: "2-digit" });
  }
  const badge = (kind, text) => h("span", { class: `badge b-${kind}`, text: text || kind.replace("_", " ") });

  function errorText(err) {
    if (!(err instanceof ApiError)) return String(err && err.message ? err.message : err);
    const d = err.detail;
    if (Array.isArray(d)) return d.map((x) => (typeof x === "string" ? x : x.msg || JSON.stringify(x))).join("; ");
    return typeof d === "string" ? d : JSON.stringify(d);
  }

  function banner(text, link) {
    const node = document.getElementById("banner");
    if (!node) return;
    node.replaceChildren(text ? document.createTextNode(text + " ") : "");
    if (link && text) node.append(h("a", { href: link, text: "Open Settings" }));
    node.hidden = !text;
  }

  // A confirmation dialog; with `input` it also asks for a number (e.g. a new budget). Resolves to the value
  // (true without input) or null when cancelled.
  function confirm({ title, text, okText = "Confirm", cancelText = "Cancel", danger = false, input = null }) {
    const dlg = document.getElementById("confirm");
    const ok = document.getElementById("confirm-ok");
    const field = document.getElementById("confirm-input");
    const extra = document.getElementById("confirm-extra");
    const err = document.getElementById("confirm-error");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    ok.textContent = okText;
    document.getElementById("confirm-cancel").textContent = cancelText;
    ok.className = danger ? "btn primary danger-fill" : "btn primary";
    extra.hidden = !input;
    err.hidden = true;
    if (input) {
      document.getElementById("confirm-label").textContent = input.label;
      field.value = input.value;
    }
    return new Promise((resolve) => {
      const done = (value) => {
        ok.onclick = null;
        document.getElementById("confirm-cancel").onclick = null;
        dlg.onclose = null;
        if (dlg.open) dlg.close();
        resolve(value);
      };
      ok.onclick = () => {
        if (!input) return done(true);
        const v = Number(field.value);
        if (!field.value || !Number.isFinite(v) || v <= 0) {
          err.textContent = "Enter a positive number.";
          err.hidden = false;
          return undefined;
        }
        return done(v);
      };
      document.getElementById("confirm-cancel").onclick = () => done(null);
      dlg.onclose = () => done(null);
      dlg.showModal();
      (input ? field : ok).focus();
    });
  }

  // Errors of actions on runs, by run id: kept (and shown next to the run's buttons, across refreshes) until the
  // user dismisses them.
  const actionErrors = new Map();
  function actionError(runId, onChange) {
    const text = actionErrors.get(runId);
    if (!text) return null;
    return h("div", { class: "action-error", role: "alert", "data-run-id": runId },
      h("span", { text }),
      h("button", { type: "button", class: "btn small link", "aria-label": "Dismiss this error", text: "Dismiss",
        onclick: () => { actionErrors.delete(runId); onChange(); } }));
  }

  // The run-status rules (which statuses are finished, stoppable, resumable, ...), rendered into every page by the
  // server from its status machine (web/status_rules.py): statusIs("finished", run.status).
  const STATUS_RULES = JSON.parse(document.getElementById("status-rules").textContent);
  const statusIs = (rule, status) => STATUS_RULES[rule].includes(status);

  // Buttons to act on a run (stop, resume, extend, retry), each behind a confirmation; none for a read-only token.
  function runActions(run, onDone) {
    if (!canWrite()) return [];
    const act = async (label, path, body) => {
      try {
        await api(path, { method: "POST", body });
        actionErrors.delete(run.id);
      } catch (err) {
        actionErrors.set(run.id, `${label} failed: ${errorText(err)}`);
      }
      onDone();
    };
    const buttons = [];
    const base = `/api/v1/runs/${run.id}`;
    // When the run's status passes `rule`: a button that asks `dialog` (red when it is a danger) and, once answered,
    // POSTs body(answer) to base/path.
    const button = (rule, action, label, ariaLabel, dialog, path, body) => {
      if (!statusIs(rule, run.status)) return;
      buttons.push(h("button", { class: dialog.danger ? "btn small danger" : "btn small", type: "button",
        "data-action": action, "aria-label": ariaLabel, text: label, onclick: async () => {
          const answer = await confirm(dialog);
          if (answer) act(label, `${base}/${path}`, body(answer));
        } }));
    };
    button("stoppable", "stop", "Stop", `Stop ${run.name}`, { title: `Stop ${run.name}?`, danger: true,
      okText: "Stop run", text: run.status === "running" ? "The trainer is told to stop at its next report; its "
        + "points and forecast are kept, and it can be resumed." : "The queued run will not start; it can be resumed." },
      "stop", () => ({ reason: "stopped from the dashboard" }));
    button("resumable", "resume", "Resume", `Resume ${run.name}`, { title: `Resume ${run.name}?`, okText: "Resume",
      text: "The run is queued again and continues from its last checkpoint when a worker takes it." },
      "resume", () => ({ reason: "resumed from the dashboard" }));
    button("retryable", "retry", "Retry", `Retry ${run.name}`, { title: `Retry ${run.name}?`, okText: "Retry",
      text: "The run is queued again; its next start counts as a new attempt." },
      "retry", () => ({ reason: "retried from the dashboard" }));
    const current = run.budget || run.compute_used || 1;
    button("extendable", "extend", "Extend", `Extend the budget of ${run.name}`, { title: `Extend ${run.name}`,
      okText: "Set budget", text: `Budget now ${compact(run.budget)}; compute used ${compact(run.compute_used)}. `
        + "A stopped or finished run must also be resumed to use it.",
      input: { label: "New budget", value: String(Number((current * 2).toPrecision(6))) } },
      "budget", (value) => ({ budget: value, reason: "budget extended from the dashboard" }));
    const error = actionError(run.id, onDone);
    if (error) buttons.push(error);
    return buttons;
  }

  async function showAuth() {
    const node = document.getElementById("auth-state");
    if (!node) return;
    if (me && me.anonymous) node.textContent = "not signed in: read-only (open reads)";
    else if (me) node.textContent = `token ${me.name}` + (me.scopes.includes("write") ? "" : " (read-only)");
    else node.textContent = token() ? "signed in with a token" : "not signed in";
  }

  // A page whose object does not exist: say so instead of an API error and a page that waits forever.
  function notFound(title, text) {
    const main = document.querySelector("main");
    main.replaceChildren(h("section", { class: "card not-found", "data-not-found": "" },
      h("h1", { text: title }), h("p", { text }),
      h("p", {}, h("a", { href: "/", text: "All experiments" }), " · ",
        h("a", { href: "/experiments/new", text: "New experiment" }))));
    document.title = `${title} · scalerl`;
  }

  function liveState(node, on) {
    node.textContent = on ? "live" : "reconnecting…";
    node.className = "live " + (on ? "on" : "off");
  }

  // Ask before a #token= link replaces a different stored token; keeping the current one is the default.
  async function offerLinkToken() {
    if (!linkToken) return;
    const offered = linkToken;
    linkToken = "";
    const tail = (t) => "…" + t.slice(-4);
    const ok = await confirm({
      title: "Replace the stored API token?",
      text: `This link carries an API token (${tail(offered)}), but this browser is already signed in with a `
        + `different one (${tail(token())}). Only replace it if you trust whoever sent the link.`,
      okText: "Use the token from the link", cancelText: "Keep the current token", danger: true });
    if (ok) {
      setToken(offered);
      location.reload();
    } else {
      banner("Kept the stored API token; the token from the link was not saved.");
    }
  }

  document.addEventListener("DOMContentLoaded", () => { showAuth(); whoami(); offerLinkToken(); });
  return { api, experimentWithRuns, stream, debounce, h, color, colors, num, compact, interval, when, badge, errorText, banner, confirm,
    runActions, statusIs, token, setToken, liveState, ApiError, whoami, canWrite, canAdmin, notFound };
})();

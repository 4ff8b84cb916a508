// The run page's engine log: the tail of the engine's output as the worker wrote it, with the last traceback and
// error lines highlighted. Loaded on request (and at once for a failed run), never on every live event.
"use strict";

const RunLog = (() => {
  const { api, h, compact } = S;

  async function load(runId, { scrollToError = false } = {}) {
    const pre = document.getElementById("log");
    const note = document.getElementById("log-note");
    const tail = document.getElementById("log-tail").value;
    note.textContent = "Loading…";
    let out;
    try {
      out = await api(`/api/v1/dashboard/runs/${runId}/log?tail_bytes=${encodeURIComponent(tail)}`);
    } catch (err) {
      note.textContent = `Could not load the log: ${S.errorText(err)}`;
      return;
    }
    if (!out.available) {
      pre.hidden = true;
      note.textContent = out.reason;
      return;
    }
    const errors = new Set(out.error_lines);
    pre.replaceChildren(...out.lines.map((line, i) => h("span", {
      class: errors.has(i) ? "log-line log-error" : "log-line", "data-line": i }, line + "\n")));
    pre.hidden = false;
    const shown = out.truncated ? `the last ${compact(out.lines.length)} lines of ${compact(out.size)} bytes`
      : `${compact(out.lines.length)} lines`;
    note.textContent = `${shown}` + (errors.size ? ` · ${errors.size} error line(s) highlighted` : " · no error found");
    const first = pre.querySelector(".log-error");
    if (scrollToError && first) pre.scrollTop = first.offsetTop - pre.offsetTop - 40;
    else pre.scrollTop = pre.scrollHeight;
  }

  // Wire the card's controls; a failed run shows its log (scrolled to the error) at once.
  function init(runId, status) {
    document.getElementById("log-load").addEventListener("click", () => load(runId, { scrollToError: true }));
    document.getElementById("log-tail").addEventListener("change", () => load(runId, { scrollToError: true }));
    if (status === "failed") load(runId, { scrollToError: true });
  }
  return { init, load };
})();

// The new-experiment form: build a grid document (or paste YAML), preview it with a dry run, submit it.
// The server validates; its messages ("key: problem") are shown next to the field at fault.
"use strict";

(() => {
  const { api, h, compact } = S;
  const form = document.getElementById("grid-form");
  const defaultsNode = document.getElementById("form-defaults");
  const DEFAULTS = defaultsNode ? JSON.parse(defaultsNode.textContent) : { axis: ["optimizer.lr", "1e-4, 2e-4"], recipe: {} };
  const axes = document.getElementById("axes");
  let axisCount = 0;

  function addAxis(key = "", values = "") {
    const n = axisCount++;
    const row = h("div", { class: "axis-row", "data-axis": n },
      h("div", { class: "field" }, h("label", { for: `axis-key-${n}`, text: "Axis (recipe key)" }),
        h("input", { id: `axis-key-${n}`, class: "axis-key", list: "recipe-keys", value: key, placeholder: "batch.prompts",
          "aria-describedby": `err-axis-${n}` })),
      h("div", { class: "field" }, h("label", { for: `axis-values-${n}`, text: "Values" }),
        h("input", { id: `axis-values-${n}`, class: "axis-values", value: values, placeholder: "32, 48, 64",
          "aria-describedby": `err-axis-${n}` }),
        h("p", { class: "field-error", id: `err-axis-${n}`, hidden: true })),
      h("button", { type: "button", class: "btn small", "aria-label": "Remove this axis", text: "Remove",
        onclick: () => row.remove() }));
    axes.append(row);
    return row;
  }

  // "32, 48" -> [32, 48]; "true" -> true; anything else stays a string.
  function parseValue(text) {
    const t = text.trim();
    if (t === "true" || t === "false") return t === "true";
    if (t !== "" && Number.isFinite(Number(t))) return Number(t);
    return t.replace(/^["']|["']$/g, "");
  }
  const splitList = (text) => text.split(",").map((s) => s.trim()).filter((s) => s !== "");

  function mode() { return form.querySelector('input[name="mode"]:checked').value; }

  function documentFromForm() {
    const doc = {
      name: form.name.value.trim(),
      preset: form.preset.value,
      seeds: splitList(form.seeds.value).map(parseValue),
      task: form.task.value.trim(),
      model: form.model.value.trim(),
      budget: form.budget.value === "" ? null : Number(form.budget.value),
      compute_unit: form.compute_unit.value.trim() || "compute",
      policy: { mode: form.policy.value },
    };
    if (form.description.value.trim()) doc.description = form.description.value.trim();
    if (form.compute_target && form.compute_target.value !== "") doc.policy.compute_target = Number(form.compute_target.value);
    // The demo's CPU sizes as the base recipe (the form's default): a grid its base model learns and can forecast.
    const sizes = document.getElementById("f-demo-sizes");
    if (sizes && sizes.checked && Object.keys(DEFAULTS.recipe || {}).length) doc.recipe = DEFAULTS.recipe;
    const m = mode();
    if (m === "grid") {
      const grid = {};
      for (const row of axes.querySelectorAll(".axis-row")) {
        const key = row.querySelector(".axis-key").value.trim();
        if (key) grid[key] = splitList(row.querySelector(".axis-values").value).map(parseValue);
      }
      doc.grid = grid;
    } else {
      doc.leave_one_out = m === "extended" ? "extended" : true;
    }
    return doc;
  }

  // A small YAML writer for grid documents (mappings, lists of scalars, scalars). The server reads YAML 1.1
  // (PyYAML): a string is written bare only when it starts with a letter, holds no character YAML treats specially
  // and is not one of its booleans or nulls (yes, Off, NULL...); anything else is a JSON string, which YAML reads
  // back as the same text ("1_000", ".inf", "0x10" would otherwise come back as numbers).
  const YAML_WORDS = /^(y|n|yes|no|true|false|on|off|null)$/i;
  const plain = (s) => /^[A-Za-z][\w.\-/]*( [\w.\-/]+)*$/.test(s) && !YAML_WORDS.test(s);
  function toYaml(value, indent = "") {
    const scalar = (v) => (typeof v === "string" && plain(v) ? v : JSON.stringify(v));
    return Object.entries(value).map(([k, v]) => {
      const key = plain(k) && !k.includes(" ") ? k : JSON.stringify(k);
      if (v && typeof v === "object" && !Array.isArray(v)) {
        const inner = toYaml(v, indent + "  ");
        return inner ? `${indent}${key}:\n${inner}` : `${indent}${key}: {}`;
      }
      if (Array.isArray(v)) return `${indent}${key}: [${v.map(scalar).join(", ")}]`;
      return `${indent}${key}: ${scalar(v)}`;
    }).join("\n");
  }

  function clearErrors() {
    for (const node of document.querySelectorAll(".field-error")) { node.hidden = true; node.textContent = ""; }
    for (const node of document.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  }

  // Where a server problem belongs: the field named by the first key segment, or the grid axis it names.
  function placeError(problem) {
    const text = String(problem);
    const i = text.indexOf(": ");
    const key = i > 0 ? text.slice(0, i) : "";
    const msg = i > 0 ? text.slice(i + 2) : text;
    const head = key.split(".")[0];
    let errNode = null, input = null;
    if (head === "grid" && key.length > 5) {
      const path = key.slice(5);
      for (const row of axes.querySelectorAll(".axis-row")) {
        const k = row.querySelector(".axis-key").value.trim();
        if (k && (k === path || path.startsWith(k + ".") || k.startsWith(path))) {
          errNode = row.querySelector(".field-error");
          input = row.querySelector(".axis-values");
          break;
        }
      }
    }
    const fieldOf = { seeds: "seeds", policy: "policy", leave_one_out: "leave_one_out", recipe: "preset" };
    const name = fieldOf[head] || head;
    if (!errNode) errNode = document.getElementById(`err-${name}`);
    if (!input) input = document.getElementById(`f-${name}`);
    if (!errNode) errNode = document.getElementById("err-document");
    errNode.textContent = errNode.textContent ? `${errNode.textContent}; ${msg}` : (errNode.id === "err-document" ? text : msg);
    errNode.hidden = false;
    if (input && input.tagName !== "FIELDSET") input.setAttribute("aria-invalid", "true");
  }

  function problemsOf(err) {
    if (err.status === 409) return [`name: ${S.errorText(err)}`];
    const d = err.detail;
    if (Array.isArray(d)) return d.map((x) => (typeof x === "string" ? x : `${(x.loc || []).slice(1).join(".")}: ${x.msg}`));
    return [S.errorText(err)];
  }

  // `unit` is the form's compute unit; a pasted document's unit is in the document itself (null here).
  function showPreview(out, unit) {
    const card = document.getElementById("preview-card");
    const each = compact(out.total_budget / Math.max(out.n_runs, 1));
    document.getElementById("preview-summary").textContent = `${out.n_runs} runs · total compute `
      + `${compact(out.total_budget)}${unit ? " " + unit : ""} (${each} each)`;
    const rows = out.runs.map((r) => h("tr", {}, h("td", { text: r.name }), h("td", { text: r.seed ?? "—" }),
      h("td", {}, h("code", { text: Object.entries(r.overrides).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ") || "(base recipe)" })),
      h("td", { class: "num", text: compact(r.budget) })));
    document.querySelector("#preview-table tbody").replaceChildren(...rows);
    // Too few evaluations to fit (estimated from earlier runs of this task and model): said at preview, by the budget.
    const warnings = out.warnings || [];
    const list = document.getElementById("preview-warnings");
    list.replaceChildren(...warnings.map((w) => h("li", { text: w })));
    list.hidden = !warnings.length;
    for (const w of warnings) if (!yamlMode()) placeError(w);
    const est = out.evaluations;
    document.getElementById("preview-evaluations").textContent = est
      ? `About ${est.per_run.toFixed(1)} evaluations a run (${est.after_burn_in.toFixed(1)} after the burn-in; `
        + `a fit needs ${est.needed}), ${est.basis || `from ${est.from_runs} earlier run(s) of this task and model`}.`
      : "No earlier run of this task and model here, and no estimate from the document (its model is not the "
        + "demo's): a forecast needs at least 4 evaluations after the burn-in; check that the budget buys that many "
        + "at the workers' eval.every.";
    // Which shape prior the forecasts will use (a team prior is learned at submission from finished runs).
    document.getElementById("preview-prior").textContent = out.fit_prior ? `Forecasts: ${out.fit_prior}.` : "";
    card.hidden = false;
  }
  const yamlMode = () => !document.getElementById("panel-yaml").hidden;

  async function send(body, { yaml, dryRun }) {
    clearErrors();
    try {
      const out = await api(`/api/v1/experiments${dryRun ? "?dry_run=true" : ""}`, { method: "POST", body, yaml });
      if (dryRun) showPreview(out, yaml ? null : form.compute_unit.value.trim() || "compute");
      else location.href = `/experiments/${out.id}`;
    } catch (err) {
      const problems = problemsOf(err);
      if (yaml) {
        const list = document.getElementById("yaml-errors");
        list.replaceChildren(...problems.map((p) => h("li", { text: p })));
        list.hidden = false;
        document.getElementById("f-yaml").setAttribute("aria-invalid", "true");
      } else {
        problems.forEach(placeError);
        const first = document.querySelector('[aria-invalid="true"]');
        if (first) first.focus();
      }
    }
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); send(documentFromForm(), { yaml: false, dryRun: false }); });
  document.getElementById("preview").addEventListener("click", () => send(documentFromForm(), { yaml: false, dryRun: true }));
  document.getElementById("add-axis").addEventListener("click", () => addAxis().querySelector("input").focus());
  const yamlText = document.getElementById("f-yaml");
  document.getElementById("yaml-form").addEventListener("submit", (e) => { e.preventDefault(); send(yamlText.value, { yaml: true, dryRun: false }); });
  document.getElementById("yaml-preview").addEventListener("click", () => send(yamlText.value, { yaml: true, dryRun: true }));
  document.getElementById("yaml-from-form").addEventListener("click", () => { yamlText.value = toYaml(documentFromForm()) + "\n"; });
  // "Start from the demo's ... grid": a grid `scalerl demo` submits (one button per preset), in the YAML tab (its
  // recipe has more keys than the form's fields), ready to preview or edit.
  for (const button of document.querySelectorAll("button.demo-preset")) {
    const demo = document.getElementById("demo-yaml-" + button.dataset.demo);
    if (demo) button.addEventListener("click", () => {
      yamlText.value = demo.content.textContent;
      document.getElementById("tab-yaml").click();
      yamlText.focus();
    });
  }

  for (const radio of form.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", () => { document.getElementById("axes-block").hidden = mode() !== "grid"; });
  }
  const tabs = [["tab-form", "panel-form"], ["tab-yaml", "panel-yaml"]];
  for (const [tab, panel] of tabs) {
    document.getElementById(tab).addEventListener("click", () => {
      for (const [t, p] of tabs) {
        document.getElementById(t).setAttribute("aria-selected", String(t === tab));
        document.getElementById(p).hidden = p !== panel;
      }
    });
  }
  addAxis(...(DEFAULTS.axis || ["optimizer.lr", "1e-4, 2e-4"]));

  // /experiments/new?from=ID: the experiment's stored document in the YAML tab, renamed, ready to edit and preview.
  const from = new URLSearchParams(location.search).get("from");
  if (from && /^\d+$/.test(from)) {
    api(`/api/v1/experiments/${from}?runs_limit=0`).then((exp) => {
      const doc = { ...exp.document, name: `${exp.name}-copy` };
      yamlText.value = toYaml(doc) + "\n";
      document.getElementById("tab-yaml").click();
      document.getElementById("clone-note").textContent = `Cloned from experiment ${exp.id} (${exp.name}).`;
      document.getElementById("clone-note").hidden = false;
    }).catch((err) => {
      document.getElementById("clone-note").textContent = `Could not clone experiment ${from}: ${S.errorText(err)}`;
      document.getElementById("clone-note").hidden = false;
    });
  }

  // An experiment for runs trained elsewhere, by name (POST /api/v1/experiments/tracking): no grid, no planned run.
  const own = document.getElementById("own-runs-form");
  if (own) own.addEventListener("submit", async (e) => {
    e.preventDefault();
    const error = document.getElementById("own-error");
    error.hidden = true;
    const body = { name: own.name.value.trim(), compute_unit: own.compute_unit.value.trim() || "gpu_hours" };
    if (own.budget.value !== "") body.budget = Number(own.budget.value);
    for (const key of ["task", "model"]) if (own[key].value.trim()) body[key] = own[key].value.trim();
    try {
      const out = await api("/api/v1/experiments/tracking", { method: "POST", body });
      location.href = `/experiments/${out.id}`;
    } catch (err) {
      error.textContent = problemsOf(err).join("; ");
      error.hidden = false;
    }
  });

  // A read-only token can look at the form but not send it.
  S.whoami().then(() => {
    if (S.canWrite()) return;
    for (const id of ["preview", "submit", "yaml-preview", "yaml-submit", "own-submit"]) {
      const b = document.getElementById(id);
      if (b) b.disabled = true;
    }
    document.getElementById("readonly-note").hidden = false;
  });
})();

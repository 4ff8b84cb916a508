// Downloads of what a page shows: a table as CSV, data as JSON (built in the browser, saved through a blob: link).
"use strict";

const Export = (() => {
  function save(text, type, filename) {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = document.createElement("a");
    a.href = url;
    a.download = filename;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  // RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled. A text field starting with
  // = + - @ (or a tab or carriage return) gets a leading apostrophe so that a spreadsheet does not run it as a
  // formula, unless it is a whole plain number ("-2+3+cmd|..." also starts with a minus and a digit).
  function cell(value) {
    if (value === null || value === undefined) return "";
    let text = typeof value === "object" ? JSON.stringify(value) : String(value);
    const number = typeof value === "number" || /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text);
    if (/^[=+\-@\t\r]/.test(text) && !number) text = "'" + text;
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  }

  function csv(columns, rows, filename) {
    const lines = [columns.map(([, label]) => cell(label)).join(",")];
    for (const row of rows) lines.push(columns.map(([key]) => cell(row[key])).join(","));
    save(lines.join("\r\n") + "\r\n", "text/csv", filename);
  }

  const json = (data, filename) => save(JSON.stringify(data, null, 2) + "\n", "application/json", filename);
  return { csv, json, cell };
})();

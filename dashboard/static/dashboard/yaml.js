/*
 * JSON → YAML, block style as kubectl prints it (lists under a key are not indented, map keys keep
 * their order), for the object inspector. Returns lines, so the inspector can diff two renderings
 * line by line and mark the lines that hold redacted values.
 *
 * A string stays plain only if every YAML 1.1 and 1.2 reader reads it back as the same string:
 * anything that could be taken for null, a boolean (yes/no/on/off too), a merge key, a number, a timestamp or a
 * version (anything starting with a digit, like go-yaml's output for timestamps), that starts with an
 * indicator character, contains ": " or " #", ends with ":", has surrounding spaces or any control
 * or line-break character is double-quoted (JSON escapes are valid YAML escapes; the characters YAML
 * treats as line breaks but JSON.stringify leaves alone are escaped as well). A multi-line string is
 * a literal block (`|`, `|-` or `|+` keeping its final line breaks exactly), unless it starts with a
 * space or a line break (which would need an indentation indicator) or holds other control
 * characters: then it is double-quoted. Empty maps and lists are `{}` and `[]`.
 */
(function (global) {
  "use strict";
  const RESERVED = /^(?:~|null|true|false|yes|no|on|off|y|n|<<|=)$/i; // "<<" and "=" are YAML 1.1 types
  const NUMBERISH = /^[-+]?\.?[0-9]|^[-+]?\.(?:inf|nan)$/i;
  const INDICATOR = /^[-?:,[\]{}#&*!|>'"%@`]/;
  const AMBIGUOUS = /: |:$| #/;
  const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\ufeff]/; // control chars and YAML line breaks
  const UNSAFE_IN_BLOCK = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\ufeff]/; // \t and \n are fine
  const JSON_LEAVES = /[\u007f-\u009f\u2028\u2029\ufeff]/g;

  function plain(s) {
    return s !== "" && s.trim() === s && !RESERVED.test(s) && !NUMBERISH.test(s) && !INDICATOR.test(s) &&
      !AMBIGUOUS.test(s) && !UNSAFE.test(s);
  }

  function quoted(s) {
    return JSON.stringify(s).replace(JSON_LEAVES, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }

  function scalar(v) {
    if (v === null || v === undefined) return "null";
    if (typeof v === "string") return plain(v) ? v : quoted(v);
    if (typeof v === "number") {
      const s = String(v);
      return /e/.test(s) && !/\./.test(s) ? s.replace("e", ".0e") : s; // 1e-7 → 1.0e-7: a float for YAML 1.1 too
    }
    return String(v);
  }

  function isBlock(v) {
    return typeof v === "string" && v.includes("\n") && !/^[ \n]/.test(v) && !UNSAFE_IN_BLOCK.test(v);
  }

  function isEmpty(v) {
    return Array.isArray(v) ? v.length === 0 : v !== null && typeof v === "object" && Object.keys(v).length === 0;
  }

  function emptyText(v) { return Array.isArray(v) ? "[]" : "{}"; }

  // `head` is the line so far ("  key:" or "- "); the value goes on it or on the lines below.
  function emit(v, head, indent, out, marker) {
    if (isBlock(v)) {
      const trailing = v.length - v.replace(/\n+$/, "").length;
      out.push({ text: head + (head.endsWith(" ") ? "" : " ") + (trailing === 0 ? "|-" : trailing === 1 ? "|" : "|+"), redacted: false });
      const lines = v.split("\n");
      lines.pop(); // the text after the last break: "" when the string ends with a break
      if (trailing === 0) lines.push(v.slice(v.lastIndexOf("\n") + 1));
      const pad = " ".repeat(indent + 2);
      for (const line of lines) out.push({ text: line === "" ? "" : pad + line, redacted: false });
    } else if (v !== null && typeof v === "object" && !isEmpty(v)) {
      if (head.trim() === "-" || /^ *(- )+$/.test(head)) {
        // A list item holding a map or a list: its first line shares the "- ".
        const start = out.length;
        if (Array.isArray(v)) list(v, indent + 2, out, marker); else map(v, indent + 2, out, marker);
        out[start].text = head + out[start].text.slice(indent + 2);
      } else {
        out.push({ text: head, redacted: false });
        if (Array.isArray(v)) list(v, indent, out, marker); else map(v, indent + 2, out, marker);
      }
    } else {
      const text = isEmpty(v) ? emptyText(v) : scalar(v);
      out.push({ text: head + (head.endsWith(" ") ? "" : " ") + text,
        redacted: !!marker && typeof v === "string" && v.startsWith(marker) });
    }
  }

  function map(obj, indent, out, marker) {
    const pad = " ".repeat(indent);
    for (const k of Object.keys(obj)) emit(obj[k], pad + scalar(k) + ":", indent, out, marker);
  }

  function list(arr, indent, out, marker) {
    const pad = " ".repeat(indent);
    for (const item of arr) emit(item, pad + "- ", indent, out, marker);
  }

  /** `value` as YAML lines: [{text, redacted}], `redacted` where a string value starts with `marker`. */
  function toYamlLines(value, marker) {
    const out = [];
    if (value !== null && typeof value === "object" && !isEmpty(value)) {
      if (Array.isArray(value)) list(value, 0, out, marker); else map(value, 0, out, marker);
    } else if (isBlock(value)) {
      emit(value, "", 0, out, marker);
      out[0].text = out[0].text.trimStart();
    } else {
      out.push({ text: isEmpty(value) ? emptyText(value) : scalar(value), redacted: !!marker && typeof value === "string" && value.startsWith(marker) });
    }
    return out;
  }

  function toYaml(value, marker) { return toYamlLines(value, marker).map((l) => l.text).join("\n") + "\n"; }

  global.ctrlscopeYaml = { toYaml, toYamlLines };
})(window);

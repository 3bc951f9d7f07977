"""The dashboard's scripts show people names, never topic segments: an informer reads ``v1/Pod``,
not ``v1_Pod``, wherever it is shown (protocol/README.md, "Which spelling where": topics and URLs
carry the segment, the data carries the name).

A segment is what ``P.topicPart(name)`` makes, what is left of a topic after its prefix
(``topic.slice(T.informer_prefix.length)``), a parsed topic's ``.name`` (``P.parseTopic``), the page's
``page.controller`` / ``page.informer`` (the URL's), any variable assigned one of these, and any
identifier called ``seg``/``segment`` (``…Seg``). Segments belong in URLs, topics, keys and
comparisons. The checker reads each ``dashboard/static/dashboard/*.js`` (comments blanked, as
``test_js_vocabulary.py`` does) and flags a segment that reaches what people read or what is kept as
a name:

- text: ``x.textContent = …``, ``x.innerText = …``, ``x.title = …``, the children and the ``title``
  attribute of ``el(tag, attrs, …children)``;
- a name kept for later: the value of ``map.set(key, value)``, and the ``name:``, ``inf:``, ``text:``,
  ``label:`` fields of an object (events panel rows keep their text this way);
- ``return`` of a segment from a function, except from the one fallback ALLOWED names.

Segments wrapped in ``encodeURIComponent(…)`` or ``U(…)`` (a URL) or used only to compare are fine.
This is the bug it keeps out: the events panel named the informer of rows that arrived before the
worker's components by its topic's segment (``informerTopics.set(t, t.slice(prefix.length))``), so
history rows read ``v1_ConfigMap`` and live ones ``v1/ConfigMap``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.protocol.test_js_vocabulary import JS_DIR, scan

# (file, function or "line text", reason): where a segment may stand in for a name.
ALLOWED: list[tuple[str, str, str]] = [
    ("controller_page.js", "informerName",
     "the one fallback: a topic no components entry names (a publisher that never announced its informer)"),
    ("protocol.js", "workerTopic", "builds a topic from names: topics carry segments"),
    ("app.js", "ctls.set(seg, { name: seg })",
     "a controller known only from its topic (its worker never announced it): the segment is all there is"),
]

SEGMENT_NAME = re.compile(r"^(?:seg|segment|\w+Seg(?:ment)?)$")
OPEN, CLOSE = "([{", ")]}"


def _extent(code: str, start: int, stops: str = ",;") -> int:
    """The end of the expression starting at ``start``: the first top-level ``stops`` character or
    closing bracket (strings and template literals skipped)."""
    depth, i = 0, start
    while i < len(code):
        c = code[i]
        if c in "\"'`":
            j = i + 1
            while j < len(code) and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0 and (c in stops or c == "\n" and ";" in stops and code[i - 1] not in "+(,=?:|&"):
            return i
        i += 1
    return i


def _args(code: str, open_paren: int) -> list[tuple[int, int]]:
    """The top-level arguments of the call whose "(" is at ``open_paren``, as (start, end)."""
    out, i = [], open_paren + 1
    while i < len(code) and code[i] != ")":
        end = _extent(code, i, ",")
        out.append((i, end))
        i = end + 1 if end < len(code) and code[end] == "," else end
    return out


def _opaque(expr: str) -> str:
    """``expr`` with what cannot carry a segment into its value blanked: a call's arguments (a function
    given a segment returns something else; a URL built by ``U(...)`` or ``encodeURIComponent(...)``
    carries it rightly), an index (``fams[seg]`` is a value, not a segment) and comparisons. A call that
    makes a segment (``P.topicPart(...)``, ``.slice(... prefix.length)``) becomes the marker ``(SEG)``."""
    out, i = [], 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            j = i + 1
            while j < len(expr) and expr[j] != c:
                j += 2 if expr[j] == "\\" else 1
            out.append(expr[i:j + 1])
            i = j + 1
            continue
        head = "".join(out).rstrip()
        if c in "([" and re.search(r"[\w$)\]]$", head):
            end = i + _extent(expr[i:], 1, "")
            if c == "(" and (head.endswith("P.topicPart") or head.endswith(".slice") and "prefix.length" in expr[i:end]):
                out.append("(SEG)")
            else:
                out.append("()" if c == "(" else "[]")
            i = end + 1
            continue
        out.append(c)
        i += 1
    return re.sub(r"[\w.$\[\]\"'()]+\s*[!=]==?\s*[\w.$\[\]\"'()]+", "0", "".join(out))


def _tainted(expr: str, names: set[str], parsed: set[str]) -> bool:
    expr = _opaque(expr)
    if "(SEG)" in expr or re.search(r"\bpage\.(?:controller|informer)\b", expr):
        return True
    # Words inside a plain string are text, not variables ("no presence entry" names no `entry`);
    # template literals stay, their ${...} is code.
    expr = re.sub(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'", '""', expr)
    for ident in re.finditer(r"(?<![\w.$])([A-Za-z_$][\w$]*)(?![\w$])(?!\s*:)", expr):
        word = ident.group(1)
        if word in names or SEGMENT_NAME.match(word):
            return True
        if word in parsed and expr[ident.end():].startswith(".name"):
            return True
    return False


def _function_at(code: str, pos: int) -> str:
    """The name of the innermost named function (``function f(``, ``x.f = function (``, ``const f = (…) =>``)
    around ``pos``."""
    best = ""
    for m in re.finditer(r"(?:function\s+(\w+)|(\w+)\s*=\s*function)\s*\(|const\s+(\w+)\s*=\s*\([^()]*\)\s*=>", code[:pos]):
        brace = code.find("{", m.end())
        arrow_body = m.group(3) and code[m.end():].lstrip()[:1] != "{"
        end = _extent(code, m.end() + (len(code[m.end():]) - len(code[m.end():].lstrip())), ";") if arrow_body \
            else brace + _extent(code[brace:], 1, "")
        if m.start() < pos <= end:
            best = m.group(1) or m.group(2) or m.group(3)
    return best


def check(path: Path) -> list[str]:
    """Every place ``path`` shows or keeps a topic segment as a name, as ``file:line: problem``."""
    name = path.name
    code, _ = scan(path.read_text())
    problems: list[str] = []
    allowed = {what for f, what, _ in ALLOWED if f == name}

    # Variables holding segments (and parsed topics, whose .name is one), to a fixed point.
    names: set[str] = set()
    parsed = {m.group(1) for m in re.finditer(r"(?:const|let|var)\s+(\w+)\s*=\s*(?:P\.parseTopic|topicOf)\(", code)}
    while True:
        before = len(names)
        for m in re.finditer(r"(?:const|let|var)\s+(\w+)\s*=\s*", code):
            if m.group(1) not in names and _tainted(code[m.end():_extent(code, m.end())], names, parsed):
                names.add(m.group(1))
        if len(names) == before:
            break

    def flag(pos: int, end: int, what: str) -> None:
        line_start = code.rfind("\n", 0, pos) + 1
        line = code[line_start:code.find("\n", pos)].strip()
        if _function_at(code, pos) in allowed or any(a in line for a in allowed):
            return
        problems.append(f"{name}:{code.count(chr(10), 0, pos) + 1}: {what}: {code[pos:end].strip()[:80]}")

    def sink(pos: int, end: int, what: str) -> None:
        if _tainted(code[pos:end], names, parsed):
            flag(pos, end, what)

    for m in re.finditer(r"\.(?:textContent|innerText|title)\s*=(?!=)\s*", code):
        sink(m.end(), _extent(code, m.end()), "a topic segment shown as text")
    for m in re.finditer(r"(?<![\w.$])el\(", code):
        args = _args(code, m.end() - 1)
        for start, end in args[2:]:
            child = re.sub(r"(?<![\w.$])el\(", "(", code[start:end])  # a nested el() is checked on its own
            if not child.lstrip().startswith("("):
                sink(start, end, "a topic segment shown as text")
        if len(args) > 1:
            attrs = code[args[1][0]:args[1][1]]
            for t in re.finditer(r"\btitle\s*:\s*", attrs):
                at = args[1][0] + t.end()
                sink(at, _extent(code, at), "a topic segment shown as a tooltip")
    for m in re.finditer(r"\.set\(", code):
        args = _args(code, m.end() - 1)
        if len(args) == 2:
            sink(*args[1], "a topic segment kept as a name (a map's value)")
    for m in re.finditer(r"(?<![\w.$])(?:name|inf|text|label)\s*:\s*(?![:/])", code):
        sink(m.end(), _extent(code, m.end()), "a topic segment kept as a name (a row or entry field)")
    for m in re.finditer(r"\breturn\s+", code):
        sink(m.end(), _extent(code, m.end()), "a topic segment returned")
    return problems


def scripts() -> list[Path]:
    return sorted(JS_DIR.glob("*.js"))


def test_no_script_shows_a_topic_segment_where_a_name_belongs():
    problems = [p for path in scripts() for p in check(path)]
    assert not problems, "\n".join(problems)


def test_the_allow_list_names_existing_files_and_places_and_stays_short():
    for file, what, _ in ALLOWED:
        assert what in (JS_DIR / file).read_text(), (file, what)
    assert len(ALLOWED) <= 3


@pytest.mark.parametrize(("injected", "expected"), [
    # The bug it keeps out, as it was: rows named by topic segment before the components arrive.
    ("function late(t) { informerTopics.set(t, t.slice(T.informer_prefix.length)); }", "a map's value"),
    ('function a(row, topic) { row.cells[1].textContent = topic.slice(T.informer_prefix.length); }', "shown as text"),
    ('function b(v) { const seg = P.topicPart(v.name); return el("b", null, "informer " + seg); }', "shown as text"),
    ('function c(v) { const part = P.topicPart(v.name); return el("a", { title: part }, "x"); }', "tooltip"),
    ('function d(topic) { const p = P.parseTopic(topic); return el("b", null, p.name); }', "shown as text"),
    ('function e(topic) { pushEvent({ ts: 1, inf: topic.slice(T.informer_prefix.length) }); }', "row or entry field"),
    ('function f() { return page.informer; }', "returned"),
])
def test_the_checker_flags_an_injected_segment(tmp_path, injected, expected):
    """The checker works: the informer page's handler panel, with one mistake added, is flagged."""
    copy = tmp_path / "app.js"
    shutil.copy(JS_DIR / "app.js", copy)
    assert check(copy) == []
    copy.write_text(copy.read_text() + "\n" + injected + "\n")
    problems = check(copy)
    assert len(problems) == 1 and expected in problems[0], problems


def test_urls_keys_and_comparisons_may_carry_segments(tmp_path):
    js = tmp_path / "x.js"
    js.write_text('function g(w, v, m) {\n'
                  '  const seg = P.topicPart(v.name);\n'
                  '  const link = el("a", { href: U("/c/" + w + "/" + encodeURIComponent(seg) + "/") }, v.name);\n'
                  '  if (P.topicPart(v.name) === page.controller) link.textContent = v.name;\n'
                  '  byTopic.set(T.informer_prefix + P.topicPart(v.name), v.name);\n'
                  '  return link;\n}\n')
    assert check(js) == []

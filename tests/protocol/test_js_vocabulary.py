"""The dashboard's scripts spell no protocol name themselves: every record kind, queue op, reconcile
result, delta/watch type, component kind, queue item state and topic they use comes from
``window.ctrlscopeProtocol`` (protocol.js, built from ``controllers.schema.browser_vocabulary()``).

The checker reads each ``dashboard/static/dashboard/*.js`` with its comments blanked out and flags:

- a ``P.<Enum>.<MEMBER>`` (or ``ctrlscopeProtocol.<Enum>.<MEMBER>``) the schema does not define, and a
  ``P.<Enum>`` that is no enum of it (a typo would be ``undefined`` at run time, silently);
- a destructured alias of an enum (``const { QUEUE } = P.RecordKind``): references stay greppable;
- a string literal compared with a record field (``r.k === "queue"``, ``"add" !== r.op``) or used as
  a ``case`` of a ``switch`` on one, and a protocol value given to such a field (``{kind: "watch"}``);
- a string or regex literal that spells a topic (``"w/"``, ``"/controller/"``, ``"leader-"``,
  ``"cluster/faults"``, ``/^w\\/…/``).

A few comparisons are genuinely not protocol (a DOM button's type, a line diff's ops): ALLOWED lists
them with the reason, and is meant to stay short.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from controllers.schema import browser_vocabulary

JS_DIR = Path(__file__).resolve().parents[2] / "dashboard" / "static" / "dashboard"
VOCAB = browser_vocabulary()
ENUMS = {name: v for name, v in VOCAB.items() if isinstance(v, dict) and name != "topics"}
TOPICS = VOCAB["topics"]
VALUES = {value for members in ENUMS.values() for value in members.values()}

FIELDS = r"(?:k|op|result|type|delta|event|outcome|state|reason|s|kind)"
# (file, field, literals, reason): comparisons of a field named like a protocol one that are not.
ALLOWED: list[tuple[str, str, set[str], str]] = [
    ("faults.js", "type", {"submit"}, "a DOM button's type"),
    ("faults.js", "state", {"ok", "off", "error"}, "GET /cluster/faults/status's answer, not telemetry"),
    ("inspect.js", "op", {"+", "-"}, "linediff.js's row ops"),
    ("linediff.js", "op", {" "}, "linediff.js's row ops"),
    ("telemetry.js", "state", {"unauthorized"}, "the websocket connection's state"),
]
# (file, literal, reason): string literals that look like a topic and are not one.
ALLOWED_LITERALS: list[tuple[str, str, str]] = [
    ("inspect.js", "/informer/", "the dashboard's URL route /c/{worker}/informer/{name}/ (dashboard/urls.py)"),
    ("scenario_banner.js", "scenarios", "the <body data-page> name of the scenarios page"),
]

_KINDS = "|".join(re.escape(k) for k in sorted(set(VOCAB["TopicKind"].values()) | set(VOCAB["ComponentKind"].values())))
TOPIC_LITERAL = re.compile(rf"^(?:{re.escape(TOPICS['worker_prefix'])}.*|/?(?:{_KINDS})/|/(?:{_KINDS}))$")
TOPIC_CONSTANTS = {TOPICS["leader_prefix"], TOPICS["faults"], TOPICS["scenarios"]}
_PREFIX_IN_REGEX = re.escape(re.escape(TOPICS["worker_prefix"]).replace("/", "\\/"))  # "w/" as a JS regex spells it
TOPIC_REGEX = re.compile(rf"(?:^\^?{_PREFIX_IN_REGEX}|\\/(?:{_KINDS})\b)")


def scan(source: str) -> tuple[str, list[tuple[int, str, str]]]:
    """``source`` with comments blanked (newlines kept), and its literals as (line, "str"|"regex", text).

    A small tokenizer, enough for these files: strings ('"`), regex literals (a "/" where an operand
    is expected), line and block comments."""
    out: list[str] = []
    literals: list[tuple[int, str, str]] = []
    i, n, line = 0, len(source), 1
    prev = ""  # the last significant character outside comments
    while i < n:
        c = source[i]
        if c == "/" and source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c == "/" and source.startswith("/*", i):
            j = source.index("*/", i) + 2
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            line += source.count("\n", i, j)
            i = j
            continue
        if c in "\"'`" or (c == "/" and (not prev or prev in "(,=:[!&|?{};+-*%<>~^" or _after_keyword(out))):
            j, esc, in_class = i + 1, False, False
            while j < n:
                d = source[j]
                if esc:
                    esc = False
                elif d == "\\":
                    esc = True
                elif c == "/" and d == "[":
                    in_class = True
                elif c == "/" and d == "]":
                    in_class = False
                elif d == c and not in_class:
                    break
                j += 1
            literals.append((line, "regex" if c == "/" else "str", source[i + 1:j]))
            out.append(source[i:j + 1])
            line += source.count("\n", i, j + 1)
            prev = c
            i = j + 1
            continue
        if c == "\n":
            line += 1
        if not c.isspace():
            prev = c
        out.append(c)
        i += 1
    return "".join(out), literals


def _after_keyword(out: list[str]) -> bool:
    tail = "".join(out[-8:]).rstrip()
    return bool(re.search(r"\b(?:return|typeof|case|in|of)$", tail))


def _line(code: str, pos: int) -> int:
    return code.count("\n", 0, pos) + 1


def _allowed(name: str, field: str, literal: str) -> bool:
    return any(f == name and fld == field and literal in lits for f, fld, lits, _ in ALLOWED)


def check(path: Path) -> list[str]:
    """Every protocol name ``path`` spells itself or gets wrong, as ``file:line: problem``."""
    name = path.name
    code, literals = scan(path.read_text())
    problems: list[str] = []

    def flag(pos_or_line: int, text: str, *, is_line: bool = False) -> None:
        problems.append(f"{name}:{pos_or_line if is_line else _line(code, pos_or_line)}: {text}")

    for m in re.finditer(r"\b(?:P|ctrlscopeProtocol)\.([A-Z][a-z]\w*)(?:\.(\w+))?", code):
        enum, member = m.groups()
        if enum not in ENUMS:
            flag(m.start(), f"P.{enum} is no enum of the protocol vocabulary")
        elif member is not None and member not in ENUMS[enum]:
            flag(m.start(), f"P.{enum}.{member} is not defined by controllers/schema.py")
    for m in re.finditer(r"\{[^{}]*\}\s*=\s*(?:P|window\.ctrlscopeProtocol)\.[A-Z][a-z]\w*\s*;", code):
        flag(m.start(), "destructured protocol enum: write P.<Enum>.<MEMBER> where it is used")
    for rx in (rf"\.({FIELDS})\s*[!=]==?\s*([\"'`])(.*?)\2", rf"([\"'`])(.*?)\1\s*[!=]==?\s*[\w.\]\[]*\.({FIELDS})\b"):
        for m in re.finditer(rx, code):
            field, literal = (m.group(1), m.group(3)) if m.group(1) in FIELDS else (m.group(3), m.group(2))
            if not _allowed(name, field, literal):
                flag(m.start(), f'raw literal "{literal}" compared with .{field}: use the P.<Enum>.<MEMBER> it means')
    for m in re.finditer(rf"(?<![\w.])({FIELDS})\s*:\s*([\"'`])(.*?)\2", code):
        if m.group(3) in VALUES and not _allowed(name, m.group(1), m.group(3)):
            flag(m.start(), f'raw literal {m.group(1)}: "{m.group(3)}" is a protocol value: use its P.<Enum>.<MEMBER>')
    for m in re.finditer(rf"switch\s*\(\s*[\w.]*\.({FIELDS})\s*\)\s*\{{", code):
        depth, j = 1, m.end()
        while depth and j < len(code):
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        for c in re.finditer(r"\bcase\s+([\"'`])(.*?)\1\s*:", code[m.end():j]):
            if not _allowed(name, m.group(1), c.group(2)):
                flag(m.end() + c.start(), f'raw literal case "{c.group(2)}" in a switch on .{m.group(1)}')
    allowed_literals = {lit for f, lit, _ in ALLOWED_LITERALS if f == name}
    for line, kind, text in literals:
        if kind == "str" and text not in allowed_literals and (TOPIC_LITERAL.match(text) or text in TOPIC_CONSTANTS):
            flag(line, f'"{text}" spells a topic: build it with P.workerTopic / P.parseTopic / P.*_TOPIC', is_line=True)
        elif kind == "regex" and TOPIC_REGEX.search(text):
            flag(line, f"/{text}/ matches topics by hand: use P.parseTopic", is_line=True)
    return problems


def scripts() -> list[Path]:
    return sorted(JS_DIR.glob("*.js"))


def test_every_script_takes_its_protocol_names_from_the_vocabulary():
    problems = [p for path in scripts() for p in check(path)]
    assert not problems, "\n".join(problems)


def test_the_allow_lists_name_existing_files_and_stay_short():
    names = {p.name for p in scripts()}
    assert {f for f, *_ in ALLOWED} <= names and {f for f, *_ in ALLOWED_LITERALS} <= names
    assert len(ALLOWED) + len(ALLOWED_LITERALS) <= 8


@pytest.mark.parametrize(("injected", "expected"), [
    ('if (r.k === "bogus") return;', 'raw literal "bogus" compared with .k'),
    ('if ("bogus" !== rec.op) return;', 'raw literal "bogus" compared with .op'),
    ("if (r.k === P.RecordKind.BOGUS) return;", "P.RecordKind.BOGUS is not defined"),
    ("if (r.k === P.RecordKinds.QUEUE) return;", "P.RecordKinds is no enum"),
    ('switch (r.k) { case "bogus": break; default: break; }', 'raw literal case "bogus"'),
    ('const t = "w/" + worker;', '"w/" spells a topic'),
    ('const t = base + "/controller/" + name;', '"/controller/" spells a topic'),
    ("const re = /^w\\/([^/]+)\\/controller\\/([^/]+)$/;", "matches topics by hand"),
    ("const { QUEUE } = P.RecordKind;", "destructured protocol enum"),
    ('rows.push({ kind: "watch", key: k });', 'raw literal kind: "watch"'),
])
def test_the_checker_flags_an_injected_mistake(tmp_path, injected, expected):
    """The checker works: the overview script, with one mistake added, is flagged."""
    copy = tmp_path / "app.js"
    shutil.copy(JS_DIR / "app.js", copy)
    assert check(copy) == []
    copy.write_text(copy.read_text() + "\n" + injected + "\n")
    problems = check(copy)
    assert len(problems) == 1 and expected in problems[0], problems


def test_comments_and_strings_that_merely_mention_topics_are_not_flagged(tmp_path):
    js = tmp_path / "x.js"
    js.write_text('// w/{worker}/queue/{name} is built by P.workerTopic\n'
                  '/* r.k === "queue" */\nconst url = "wss:" + "//" + host;\nconst half = a / 2 / b;\n')
    assert check(js) == []

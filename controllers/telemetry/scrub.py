"""SecretScrubber: no value of a Secret the worker has seen leaves it, in any outgoing string.

Redaction (``redaction.py``) hides a Secret's own fields. It cannot hide the same value where a
controller copied it: an exception text ("login refused for password=…"), a log line, a handler
outcome, a status row, or another object the inspector shows (a ConfigMap or a Pod's ``env`` holding
the value). So the worker remembers every Secret value it caches or reads, and the publisher passes
every frame and every inspector answer through ``scrub_json`` before it is framed: a string value that
contains a known secret value gets that part replaced by ``<redacted: Secret ns/name key>``.

What counts as a value, per key of ``data`` (base64 in the API) and ``stringData`` (plain):

* the decoded text (when it is UTF-8), and each line of a multi-line value (a PEM key's body lines)
  of at least ``LINE_MIN_LENGTH`` characters, since a log line often carries one line of it;
* the base64 text the API holds, padded and unpadded (controllers log what they got).

Values shorter than ``min_length`` (default 8, ``CTRLSCOPE_SCRUB_MIN_LENGTH``) stay untouched: short
values are ports, booleans, usernames and namespace names ("5432", "true", "admin", "default") that
occur everywhere; masking them would garble unrelated text and, by where the masks fall, tell every
viewer the value. A real secret (password, token, key) is longer.

How it stays cheap: the frame is already JSON bytes, so the common case is one scan of them with an
Aho–Corasick automaton over all patterns (``ahocorasick_rs``, linear in the text, independent of
the number of patterns) that finds nothing. Only a frame with a hit is decoded, walked, and
re-encoded, so a mask never lands in JSON syntax (a pattern can match across an escape such as
``\\n``). The automata are rebuilt lazily, at most once per scrub call, after the set of values
changed.

What is not scrubbed, by design: dict keys (field, label and data key names) and the string values
of identifier fields (``IDENTIFIER_FIELDS``: object keys, names, namespaces, request paths). Object
names are never secret in Kubernetes (they are in every URL and audit log), and masking them would
break the dashboard's keys. Limits: a value transformed in other ways (split, URL-encoded, hex,
hashed, encoded twice) is not recognised, nor a value the worker never saw (a Secret read by a
client other than the worker's).
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import ahocorasick_rs
import orjson

MIN_LENGTH = 8
LINE_MIN_LENGTH = 16
RETIRED_LIMIT = 10_000
"""Patterns of deleted or changed Secret values stay known (an error about them may come later), up
to this many, the oldest forgotten first."""

IDENTIFIER_FIELDS = frozenset({
    "key", "keys", "requests", "name", "namespace", "path", "uid", "rv", "resourceVersion", "informer",
    "controller", "queue", "handler", "worker", "topic", "src", "k", "op", "kind", "apiVersion",
})
"""Fields whose string values name things (never free text): never scrubbed (module docstring)."""


def _min_length_from_env() -> int:
    raw = os.environ.get("CTRLSCOPE_SCRUB_MIN_LENGTH", "")
    if not raw:
        return MIN_LENGTH
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"CTRLSCOPE_SCRUB_MIN_LENGTH must be a whole number of characters, not {raw!r}") from None
    if value < 4:
        raise ValueError(f"CTRLSCOPE_SCRUB_MIN_LENGTH must be at least 4 (got {value}): shorter values are everywhere")
    return value


class SecretScrubber:
    """Knows the Secret values this process has seen; masks them in outgoing strings (module doc)."""

    def __init__(self, *, min_length: int | None = None, retired_limit: int = RETIRED_LIMIT) -> None:
        self.min_length = _min_length_from_env() if min_length is None else min_length
        self.retired_limit = retired_limit
        self._lock = threading.Lock()
        self._live: dict[str, dict[str, str]] = {}  # owner (uid or ns/name) → pattern → label
        self._retired: OrderedDict[str, str] = OrderedDict()  # pattern → label, oldest first
        self._dirty = False
        self._patterns: list[str] = []
        self._labels: list[str] = []
        self._text: ahocorasick_rs.AhoCorasick | None = None
        self._bytes: ahocorasick_rs.BytesAhoCorasick | None = None
        self.frames_scrubbed = 0  # frames (or answers) in which something was masked
        self.values_masked = 0

    # -- learning (informer / client threads) -------------------------------------------------
    def learn(self, obj: Any) -> None:
        """Remember the values of ``obj`` if it is a Secret (anything else is ignored)."""
        found = self._values(obj)
        if found is None:
            return
        owner, patterns = found
        with self._lock:
            if self._live.get(owner) == patterns:
                return
            old = self._live.get(owner)
            if old:
                self._retire(old, keep=patterns)
            if patterns:
                self._live[owner] = patterns
            else:
                self._live.pop(owner, None)
            self._dirty = True

    def learn_all(self, objs: Iterable[Any]) -> None:
        for obj in objs:
            self.learn(obj)

    def forget(self, obj: Any) -> None:
        """A Secret left the cache: its values move to the bounded retired set (still masked)."""
        found = self._values(obj)
        if found is None:
            return
        owner, _ = found
        with self._lock:
            old = self._live.pop(owner, None)
            if old:
                self._retire(old, keep={})
                self._dirty = True

    def _retire(self, patterns: dict[str, str], *, keep: dict[str, str]) -> None:
        for pattern, label in patterns.items():
            if pattern not in keep:
                self._retired[pattern] = label
                self._retired.move_to_end(pattern)
        while len(self._retired) > self.retired_limit:
            self._retired.popitem(last=False)

    def _values(self, obj: Any) -> tuple[str, dict[str, str]] | None:
        if not isinstance(obj, dict) or obj.get("kind") != "Secret":
            return None
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        owner = str(meta.get("uid") or f"{ns}/{name}")
        where = f"{ns}/{name}" if ns else name
        patterns: dict[str, str] = {}
        for field, encoded in (("data", True), ("stringData", False)):
            values = obj.get(field)
            if not isinstance(values, dict):
                continue
            for key, value in values.items():
                if not isinstance(value, str):
                    continue
                label = f"<redacted: Secret {where} {key}>"
                for form in self._forms(value, encoded):
                    patterns.setdefault(form, label)
        return owner, patterns

    def _forms(self, value: str, encoded: bool) -> list[str]:
        forms: list[str] = []
        text: str | None = value
        if encoded:
            forms += [value, value.rstrip("=")]
            try:
                text = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):  # not base64 or not UTF-8 text: the encoded forms only
                text = None
        else:
            forms += [base64.b64encode(value.encode()).decode(), base64.b64encode(value.encode()).decode().rstrip("=")]
        if text is not None:
            forms.append(text)
            if "\n" in text:
                forms += [line.strip() for line in text.splitlines()
                          if len(line.strip()) >= LINE_MIN_LENGTH and not line.startswith("-----")]
        return [f for f in dict.fromkeys(forms) if len(f) >= self.min_length]

    # -- scrubbing (publisher thread) -----------------------------------------------------------
    @property
    def pattern_count(self) -> int:
        self._rebuild()
        return len(self._patterns)

    def _rebuild(self) -> None:
        if not self._dirty:
            return
        with self._lock:
            if not self._dirty:
                return
            merged: dict[str, str] = dict(self._retired)
            for patterns in self._live.values():
                merged.update(patterns)
            self._patterns, self._labels = list(merged), list(merged.values())
            kind = ahocorasick_rs.MatchKind.LeftmostLongest
            if self._patterns:
                self._text = ahocorasick_rs.AhoCorasick(self._patterns, matchkind=kind)
                # In the JSON text a value appears JSON-escaped ("\"", "\\", control characters).
                escaped = [orjson.dumps(p)[1:-1] for p in self._patterns]
                self._bytes = ahocorasick_rs.BytesAhoCorasick(escaped, matchkind=kind)
            else:
                self._text = self._bytes = None
            self._dirty = False

    def scrub_text(self, text: str) -> str:
        """``text`` with every known value replaced by its mask."""
        self._rebuild()
        automaton = self._text
        if automaton is None or not text:
            return text
        hits = automaton.find_matches_as_indexes(text)
        if not hits:
            return text
        out, pos = [], 0
        for index, start, end in hits:
            out += [text[pos:start], self._labels[index]]
            pos = end
        out.append(text[pos:])
        self.values_masked += len(hits)
        return "".join(out)

    def scrub(self, value: Any, field: str | None = None) -> Any:
        """A copy of a JSON-like value with every string scrubbed (identifier fields excepted)."""
        if isinstance(value, str):
            return value if field in IDENTIFIER_FIELDS else self.scrub_text(value)
        if isinstance(value, dict):
            return {k: self.scrub(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return value if field in IDENTIFIER_FIELDS else [self.scrub(v) for v in value]
        return value

    def scrub_json(self, data: bytes) -> bytes:
        """JSON bytes with every known value masked in string values; ``data`` itself when clean."""
        self._rebuild()
        automaton = self._bytes
        if automaton is None or not automaton.find_matches_as_indexes(data):
            return data
        masked = self.values_masked
        out = orjson.dumps(self.scrub(orjson.loads(data)))
        if self.values_masked == masked:  # only in keys or identifier fields: nothing to hide
            return data
        self.frames_scrubbed += 1
        return out


SECRETS = SecretScrubber()
"""The process' scrubber: every publisher and the inspector of this process use it."""

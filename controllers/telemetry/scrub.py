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
``\\n``). The automata are rebuilt lazily, in two tiers so that a Secret that changes costs well
under a millisecond (``_rebuild``).

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
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import ahocorasick_rs
import orjson

MIN_LENGTH = 8
LINE_MIN_LENGTH = 16
RECENT_LIMIT = 256
"""New value forms matched by the small automaton before all are merged into the big one."""
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
        self._base: ahocorasick_rs.BytesAhoCorasick | None = None
        self._base_patterns: frozenset[str] = frozenset()
        self._base_labels: list[str] = []
        self._recent: ahocorasick_rs.BytesAhoCorasick | None = None
        self._recent_labels: list[str] = []
        self._fresh: dict[str, str] = {}  # patterns learned since the base automaton was built
        self.frames_scrubbed = 0  # frames (or answers) in which something was masked
        self.values_masked = 0

    # -- learning (informer / client threads) -------------------------------------------------
    def learn(self, obj: Any) -> None:
        """Remember the values of ``obj`` if it is a Secret, or of each item of a SecretList (whose
        items carry no ``kind``); anything else is ignored."""
        if isinstance(obj, dict) and obj.get("kind") == "SecretList":
            for item in obj.get("items") or ():
                if isinstance(item, dict):
                    self.learn({**item, "kind": "Secret"})
            return
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
            added = {p: label for p, label in patterns.items() if p not in self._base_patterns}
            if added.keys() - self._fresh.keys():
                self._fresh.update(added)
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
                self._retire(old, keep={})  # still matched by the automata: nothing to rebuild

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
            encoded_value = base64.b64encode(value.encode()).decode()
            forms += [encoded_value, encoded_value.rstrip("=")]
        if text is not None:
            forms.append(text)
            if "\n" in text:
                forms += [line.strip() for line in text.splitlines()
                          if len(line.strip()) >= LINE_MIN_LENGTH and not line.startswith("-----")]
        return [f for f in dict.fromkeys(forms) if len(f) >= self.min_length]

    # -- scrubbing (publisher thread) -----------------------------------------------------------
    @property
    def knows_nothing(self) -> bool:
        """No value learnt yet, nor waiting to be built in: every string passes unchanged."""
        return self._base is None and self._recent is None and not self._dirty

    @property
    def pattern_count(self) -> int:
        """Distinct value forms known (what the automata match, before JSON escaping)."""
        self._rebuild()
        with self._lock:
            return len(self._merged())

    def _merged(self) -> dict[str, str]:
        merged: dict[str, str] = dict(self._retired)
        for patterns in self._live.values():
            merged.update(patterns)
        return merged

    def _rebuild(self) -> None:
        """Make the automata match the known values. Two tiers, because building one over ~8,000
        patterns takes ~100 ms (bench/scrub.py): new values go into a small ``recent`` automaton,
        rebuilt in well under a millisecond; past ``RECENT_LIMIT`` patterns, everything is merged
        into the ``base`` one. A value that is no longer known stays matched until the next merge,
        which is harmless (it was a secret)."""
        if not self._dirty:
            return
        with self._lock:
            if not self._dirty:
                return
            fresh = self._fresh
            if len(fresh) > RECENT_LIMIT or self._base is None:
                self._base, self._base_patterns, self._base_labels = self._build(self._merged())
                self._recent, self._recent_labels = None, []
                fresh.clear()
            else:
                self._recent, _, self._recent_labels = self._build(fresh)
            self._dirty = False

    @staticmethod
    def _build(patterns: dict[str, str]) -> tuple[ahocorasick_rs.BytesAhoCorasick | None, frozenset[str], list[str]]:
        """An automaton over each value's UTF-8 and, where it differs, its JSON-escaped form (how it
        appears inside the frame's JSON text), with the mask of each."""
        forms: dict[bytes, str] = {}
        for pattern, label in patterns.items():
            forms.setdefault(pattern.encode(), label)
            forms.setdefault(orjson.dumps(pattern)[1:-1], label)
        if not forms:
            return None, frozenset(), []
        automaton = ahocorasick_rs.BytesAhoCorasick(list(forms), matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)
        return automaton, frozenset(patterns), list(forms.values())

    def _hits(self, data: bytes) -> list[tuple[int, int, str]]:
        """Non-overlapping ``(start, end, mask)`` of every known value in ``data``, leftmost-longest."""
        found: list[tuple[int, int, str]] = []
        for automaton, labels in ((self._base, self._base_labels), (self._recent, self._recent_labels)):
            if automaton is not None:
                found += [(start, end, labels[i]) for i, start, end in automaton.find_matches_as_indexes(data)]
        if len(found) > 1:
            found.sort(key=lambda hit: (hit[0], -hit[1]))
            kept, last = [], -1
            for hit in found:
                if hit[0] >= last:
                    kept.append(hit)
                    last = hit[1]
            found = kept
        return found

    def scrub_text(self, text: str) -> str:
        """``text`` with every known value replaced by its mask."""
        self._rebuild()
        if not text or self.knows_nothing:
            return text
        data = text.encode("utf-8", "surrogatepass")
        hits = self._hits(data)
        if not hits:
            return text
        # UTF-8 is self-synchronising: a match of a whole UTF-8 pattern starts and ends on character
        # boundaries, so the pieces between matches decode on their own.
        out, pos = [], 0
        for start, end, mask in hits:
            out += [data[pos:start].decode("utf-8", "surrogatepass"), mask]
            pos = end
        out.append(data[pos:].decode("utf-8", "surrogatepass"))
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
        if self.knows_nothing or not self._hits(data):
            return data
        masked = self.values_masked
        out = orjson.dumps(self.scrub(orjson.loads(data)))
        if self.values_masked == masked:  # only in keys or identifier fields: nothing to hide
            return data
        self.frames_scrubbed += 1
        return out


SECRETS = SecretScrubber()
"""The process' scrubber: every publisher and the inspector of this process use it."""


class ScrubbingFilter(logging.Filter):
    """A logging filter that masks known Secret values in the process' own log lines (the worker's
    stderr ends up in a cluster's log store too). The message is formatted once here, then frozen."""

    def filter(self, record: logging.LogRecord) -> bool:
        if SECRETS.knows_nothing:
            return True  # nothing known yet: the common case costs one check
        message = record.getMessage()
        scrubbed = SECRETS.scrub_text(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        exc_text = SECRETS.scrub_text(record.exc_text) if record.exc_text else record.exc_text
        if scrubbed is not message or exc_text is not record.exc_text:
            record.msg, record.args, record.exc_text = scrubbed, None, exc_text
        return True

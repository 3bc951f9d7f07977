"""Label selectors (apimachinery ``pkg/labels``): the grammar the API server parses and clients send,
one definition for the simulator (which filters LISTs and WATCHes with it) and the runtime (whose
reconciler client filters cache reads with it).

Comma-separated requirements, all of which must hold: ``k`` (exists), ``!k`` (does not),
``k=v``/``k==v``, ``k!=v`` (true when the label is absent too), ``k in (a,b)``, ``k notin (a,b)``
(true when absent). Keys and values are checked as the API server checks them; a selector that does
not parse raises ``SelectorError`` with the API server's message. A selector compiles once to a
predicate over a raw object dict, so matching thousands of objects costs no re-parsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[dict[str, Any]], bool]


class SelectorError(ValueError):
    """A label selector that does not parse: the message is the API server's."""


def everything(_obj: dict[str, Any]) -> bool:
    """The empty selector: matches every object."""
    return True


LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` value sets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str, source: str) -> str:
    key = key.strip()
    if not key or len(key) > 316 or not LABEL_NAME.match(key):
        raise SelectorError(f"unable to parse requirement: invalid label key \"{key}\" in selector \"{source}\"")
    return key


def _check_value(value: str, source: str) -> str:
    value = value.strip()
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise SelectorError(f"unable to parse requirement: invalid label value: \"{value}\" in selector \"{source}\"")
    return value


_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s*\((?P<vals>[^()]*)\)\s*$")


def parse_label_selector(text: str | None) -> Matcher:
    """Compile a label selector string; raises ``SelectorError`` when it does not parse."""
    if not text or not text.strip():
        return everything
    preds: list[Callable[[dict[str, str]], bool]] = []
    for raw in _split_top_level(text):
        req = raw.strip()
        if not req:
            raise SelectorError(f"unable to parse requirement: found '', expected: identifier in selector \"{text}\"")
        m = _SET_RE.match(req)
        if m:
            key = _check_key(m["key"], text)
            vals = frozenset(_check_value(v, text) for v in m["vals"].split(",")) if m["vals"].strip() else None
            if vals is None:
                raise SelectorError(f"unable to parse requirement: for 'in', 'notin' operators, values set can't be empty in selector \"{text}\"")
            if m["op"] == "in":
                preds.append(lambda labels, k=key, vs=vals: labels.get(k) in vs)
            else:
                preds.append(lambda labels, k=key, vs=vals: labels.get(k) not in vs)
            continue
        if req.startswith("!"):
            key = _check_key(req[1:], text)
            preds.append(lambda labels, k=key: k not in labels)
            continue
        for op in ("!=", "==", "="):
            if op in req:
                key, _, value = req.partition(op)
                key = _check_key(key, text)
                value = _check_value(value, text)
                if op == "!=":
                    preds.append(lambda labels, k=key, v=value: labels.get(k) != v)
                else:
                    preds.append(lambda labels, k=key, v=value: labels.get(k) == v)
                break
        else:
            if any(c in req for c in "()<> "):
                raise SelectorError(f"unable to parse requirement: found '{req}', expected: identifier in selector \"{text}\"")
            key = _check_key(req, text)
            preds.append(lambda labels, k=key: k in labels)

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(p(labels) for p in preds)

    return match


def selector_from_label_selector(sel: dict[str, Any] | None) -> str:
    """Render a ``metav1.LabelSelector`` (matchLabels/matchExpressions) as a selector string."""
    if not sel:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)




def format_match_labels(labels: Mapping[str, str]) -> str:
    """``{"app": "web", "tier": "db"}`` as the selector ``app=web,tier=db`` (controller-runtime's
    ``MatchingLabels``), keys sorted."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

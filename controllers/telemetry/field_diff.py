"""Which fields an update changed: the dotted paths that differ between two versions of an object.

An ``event`` record of an update carries them (protocol 1.7, ``diff``), and so does the trigger it
leaves for the next attempt of the keys it was mapped to: that is how a hot loop names the field its
own write keeps changing (``status.lastReconciled``, ``metadata.annotations.example.com/synced-at``).

The walk is the protocol's (protocol/README.md, "Provenance, self-triggering and findings"), so
every publisher reports the same paths for the same pair of objects:

- depth first, the keys of each object in code point order, a list's indexes as segments
  (``spec.containers.0.image``);
- a key present on one side only, an index past the other list's end, or a value of another JSON
  type is a path of its own, not walked into;
- ``metadata.resourceVersion`` is never a path (every update changes it); ``metadata.managedFields``
  is compared as one value, and so is anything at depth ``DIFF_MAX_DEPTH``: paths stay short and the
  walk stays cheap on objects with deep or bulky bookkeeping;
- the first ``DIFF_MAX_PATHS`` paths are listed and the rest only counted.

Cost: equal subtrees are skipped with one ``==`` (a C-level comparison), so an update that changes
one status field walks the path to it and compares its siblings, not the whole object.
"""

from __future__ import annotations

from typing import Any

from controllers.schema import DIFF_MAX_DEPTH, DIFF_MAX_PATHS

_SKIPPED = ("metadata", "resourceVersion")
_WHOLE = ("metadata", "managedFields")


def diff_paths(old: Any, new: Any) -> tuple[list[str], int]:
    """The paths that differ between ``old`` and ``new`` (at most ``DIFF_MAX_PATHS``, in walk order)
    and how many more differ beyond those."""
    paths: list[str] = []
    more = 0

    def add(path: tuple[str, ...]) -> None:
        nonlocal more
        if len(paths) < DIFF_MAX_PATHS:
            paths.append(".".join(path))
        else:
            more += 1

    def walk(a: Any, b: Any, path: tuple[str, ...]) -> None:
        if path == _SKIPPED or _same(a, b):
            return
        if path == _WHOLE or len(path) == DIFF_MAX_DEPTH:
            add(path)
        elif type(a) is dict and type(b) is dict:
            for key in sorted(a.keys() | b.keys()):
                sub = (*path, key)
                if key in a and key in b:
                    walk(a[key], b[key], sub)
                elif sub != _SKIPPED:
                    add(sub)
        elif type(a) is list and type(b) is list:
            shared = min(len(a), len(b))
            for i in range(shared):
                walk(a[i], b[i], (*path, str(i)))
            for i in range(shared, max(len(a), len(b))):
                add((*path, str(i)))
        elif path:
            add(path)

    walk(old, new, ())
    return paths, more


def _same(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (``1`` equals ``1.0``), but ``true`` is not ``1``, which
    Python's ``==`` would say."""
    if a is b:
        return True
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    return bool(a == b)

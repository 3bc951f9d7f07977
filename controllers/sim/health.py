"""``/healthz``, ``/livez`` and ``/readyz`` as kube-apiserver serves them (k8s.io/apiserver ``healthz``).

Each endpoint runs a list of named checks. A plain ``GET`` answers ``ok``; ``?verbose`` lists every
check on its own line (``[+]ping ok``) and ends with ``readyz check passed``; ``?exclude=etcd``
skips a check (``[+]etcd excluded: ok``, and a ``warn:`` line for a name that matches none);
``/readyz/etcd`` runs that one check. A path naming no check is the mux's plain-text 404.

The simulator has no etcd to ping and no post-start hooks to wait for: its checks are the generic
ones every kube-apiserver registers, and they pass as soon as it serves, which is what a script
that waits on ``/readyz`` (or reads ``/readyz/etcd``) needs to see.
"""

from __future__ import annotations

from collections.abc import Iterable

_LIVE = ("ping", "log", "etcd")
CHECKS: dict[str, tuple[str, ...]] = {
    "healthz": _LIVE,
    "livez": _LIVE,
    # readyz also waits for etcd to answer reads, the informers to sync and a shutdown to be ahead.
    "readyz": (*_LIVE, "etcd-readiness", "informer-sync", "shutdown"),
}


def answer(path: str, *, verbose: bool, excluded: Iterable[str]) -> str | None:
    """The body of a health request for ``path`` (``/readyz``, ``/readyz/ping``), or None when
    the path names no endpoint or check (a 404)."""
    endpoint, _, check = path.strip("/").partition("/")
    checks = CHECKS.get(endpoint)
    if checks is None:
        return None
    if check:
        return "ok" if check in checks else None
    if not verbose:
        return "ok"
    skip = set(excluded)
    lines = [f"[+]{name} excluded: ok" if name in skip else f"[+]{name} ok" for name in checks]
    unmatched = sorted(skip - set(checks))
    if unmatched:
        names = ",".join(f'"{name}"' for name in unmatched)
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
    lines.append(f"{endpoint} check passed")
    return "\n".join(lines) + "\n"

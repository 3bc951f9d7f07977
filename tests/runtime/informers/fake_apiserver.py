"""An in-memory stand-in for the API server's list/watch of one resource, for reflector and informer
tests before (and besides) the HTTP simulator.

It keeps objects, a monotonically increasing resourceVersion, and an event log. Watches replay the
log after their RV and then wait for new events; ``drop_watches`` ends them like a lost connection;
``compact`` forgets history so a watch or continue token older than it gets 410 Expired. Failures
can be injected per call (``list_errors``, ``watch_errors``). Every call is recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from controllers.informers.listwatch import ApiError, ListResult, WatchEvent

Obj = dict[str, Any]


class FakeWatch:
    def __init__(self, server: FakeApiServer, start_index: int, expired: bool,
                 prelude: list[WatchEvent] | None = None) -> None:
        self.server = server
        self.index = start_index
        self.expired = expired
        self.prelude = prelude or []
        self.closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        server = self.server
        if self.expired:
            yield WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                                       "message": "too old resource version"})
            return
        for event in self.prelude:
            if self.closed:
                return
            yield event
        while True:
            with server.cond:
                while not self.closed and self.index >= len(server.log):
                    server.cond.wait()
                if self.closed:
                    return
                event = server.log[self.index]
                self.index += 1
            yield event

    def close(self) -> None:
        with self.server.cond:
            self.closed = True
            self.server.cond.notify_all()


class FakeApiServer:
    """One resource's objects, RV counter and event log, behind the ``ListWatch`` interface."""

    def __init__(self, kind: str = "Pod", api_version: str = "v1") -> None:
        self.kind = kind
        self.api_version = api_version
        self.cond = threading.Condition()
        self.rv = 100
        self.objects: dict[str, Obj] = {}
        self.log: list[WatchEvent] = []
        self.log_rvs: list[int] = []
        self.compacted_rv = 0
        self.snapshots: dict[int, list[Obj]] = {}
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.list_errors: list[BaseException] = []
        self.watch_errors: list[BaseException] = []
        self.watches: list[FakeWatch] = []

    def describe(self) -> str:
        return f"{self.api_version} {self.kind}"

    # -- mutations (the "cluster") ---------------------------------------------------------
    def _emit(self, etype: str, obj: Obj) -> None:
        self.log.append(WatchEvent(etype, obj))
        self.log_rvs.append(self.rv)
        self.cond.notify_all()

    def _obj(self, name: str, namespace: str, spec: Any, uid: str) -> Obj:
        return {"apiVersion": self.api_version, "kind": self.kind,
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(self.rv), "uid": uid},
                "spec": spec}

    def create(self, name: str, namespace: str = "default", spec: Any = None) -> Obj:
        with self.cond:
            self.rv += 1
            key = f"{namespace}/{name}"
            assert key not in self.objects
            obj = self._obj(name, namespace, spec, f"uid-{self.rv}")
            self.objects[key] = obj
            self._emit("ADDED", obj)
            return obj

    def update(self, name: str, namespace: str = "default", spec: Any = None) -> Obj:
        with self.cond:
            self.rv += 1
            key = f"{namespace}/{name}"
            obj = self._obj(name, namespace, spec, self.objects[key]["metadata"]["uid"])
            self.objects[key] = obj
            self._emit("MODIFIED", obj)
            return obj

    def delete(self, name: str, namespace: str = "default") -> None:
        with self.cond:
            self.rv += 1
            old = self.objects.pop(f"{namespace}/{name}")
            gone = dict(old, metadata=dict(old["metadata"], resourceVersion=str(self.rv)))
            self._emit("DELETED", gone)

    def bookmark(self) -> None:
        with self.cond:
            self._emit("BOOKMARK", {"kind": self.kind, "apiVersion": self.api_version,
                                    "metadata": {"resourceVersion": str(self.rv)}})

    def compact(self) -> None:
        """Forget all history up to now: older watches and continue tokens get 410."""
        with self.cond:
            self.compacted_rv = self.rv

    def drop_watches(self) -> None:
        """End every open watch, like a dropped connection."""
        with self.cond:
            for w in self.watches:
                w.closed = True
            self.watches.clear()
            self.cond.notify_all()

    def state(self) -> dict[str, Obj]:
        with self.cond:
            return dict(self.objects)

    # -- ListWatch ---------------------------------------------------------------------------
    def list(self, *, resource_version: str, limit: int = 0, continue_token: str = "") -> ListResult:
        with self.cond:
            self.list_calls.append({"resource_version": resource_version, "limit": limit,
                                    "continue_token": continue_token})
            if self.list_errors:
                raise self.list_errors.pop(0)
            if continue_token:
                snap_rv, offset = (int(x) for x in continue_token.split(":"))
                if snap_rv < self.compacted_rv:
                    raise ApiError(410, "Expired", "continue token expired")
                items = self.snapshots[snap_rv]
            else:
                snap_rv, offset = self.rv, 0
                items = [self.objects[k] for k in sorted(self.objects)]
                self.snapshots[snap_rv] = items
            if not limit or offset + limit >= len(items):
                return ListResult(items[offset:], str(snap_rv), "")
            return ListResult(items[offset:offset + limit], str(snap_rv), f"{snap_rv}:{offset + limit}")

    def watch(self, *, resource_version: str, timeout_seconds: int, allow_watch_bookmarks: bool = True,
              send_initial_events: bool = False) -> FakeWatch:
        with self.cond:
            self.watch_calls.append({"resource_version": resource_version, "timeout_seconds": timeout_seconds,
                                     "allow_watch_bookmarks": allow_watch_bookmarks,
                                     "send_initial_events": send_initial_events})
            if self.watch_errors:
                raise self.watch_errors.pop(0)
            if send_initial_events:
                prelude = [WatchEvent("ADDED", self.objects[k]) for k in sorted(self.objects)]
                prelude.append(WatchEvent("BOOKMARK", {
                    "kind": self.kind, "apiVersion": self.api_version,
                    "metadata": {"resourceVersion": str(self.rv),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}}))
                w = FakeWatch(self, len(self.log), expired=False, prelude=prelude)
                self.watches.append(w)
                return w
            rv = int(resource_version or self.rv)
            start = len(self.log_rvs)
            while start > 0 and self.log_rvs[start - 1] > rv:
                start -= 1
            w = FakeWatch(self, start, expired=rv < self.compacted_rv)
            self.watches.append(w)
            return w


class FakeClient:
    """A ``ListWatchClient`` with one ``FakeApiServer`` per api_version/kind (namespaces ignored)."""

    def __init__(self) -> None:
        self.servers: dict[tuple[str, str], FakeApiServer] = {}

    def list_watch(self, api_version: str, kind: str, namespace: str | None = None) -> FakeApiServer:
        return self.servers.setdefault((api_version, kind), FakeApiServer(kind, api_version))

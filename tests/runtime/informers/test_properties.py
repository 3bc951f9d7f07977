"""Property: after any sequence of watch events, dropped watches, compactions (410 -> relist) and
bookmarks, the informer's cache -- and what a handler built from its notifications -- equals the
server's state; with LIST+WATCH and with the streaming WatchList."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controllers.clock import RealClock
from controllers.informers import Backoff, DeletedFinalStateUnknown, SharedInformer, object_key
from tests.runtime.conftest import wait_until
from tests.runtime.informers.fake_apiserver import FakeApiServer

OPS = st.lists(st.tuples(st.sampled_from(["create", "update", "delete", "drop", "compact", "bookmark"]),
                         st.sampled_from("abcd")), max_size=40)


class Mirror:
    """Rebuilds the object set from handler notifications alone."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}

    def on_add(self, obj: Any) -> None:
        self.objects[object_key(obj)] = obj["metadata"]["resourceVersion"]

    def on_update(self, old: Any, new: Any) -> None:
        self.on_add(new)

    def on_delete(self, obj: Any) -> None:
        key = obj.key if isinstance(obj, DeletedFinalStateUnknown) else object_key(obj)
        self.objects.pop(key)


def server_view(server: FakeApiServer) -> dict[str, str]:
    return {k: o["metadata"]["resourceVersion"] for k, o in server.state().items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from("abc"), st.none()), max_size=3), OPS, st.booleans())
def test_cache_converges_to_server_state(initial: list[tuple[str, None]], ops: list[tuple[str, str]],
                                         use_watch_list: bool) -> None:
    clock = RealClock()
    server = FakeApiServer()
    for name, _ in dict(initial).items():
        server.create(name)
    informer = SharedInformer(server, clock=clock)
    informer.reflector.backoff = Backoff(initial=0.001, cap=0.005, jitter=0.0, clock=clock)
    informer.reflector.use_watch_list = use_watch_list
    mirror = Mirror()
    reg = informer.add_event_handler(on_add=mirror.on_add, on_update=mirror.on_update, on_delete=mirror.on_delete)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        for op, name in ops:
            exists = f"default/{name}" in server.state()
            if op == "create" and not exists:
                server.create(name)
            elif op == "update" and exists:
                server.update(name, spec={"n": server.rv})
            elif op == "delete" and exists:
                server.delete(name)
            elif op == "drop":
                server.drop_watches()
            elif op == "compact":
                server.compact()
                server.drop_watches()
            elif op == "bookmark":
                server.bookmark()
        expected = server_view(server)
        wait_until(lambda: {k: o["metadata"]["resourceVersion"] for k, o in
                            ((k, informer.store.get_by_key(k)) for k in informer.store.list_keys())} == expected,
                   timeout=5)
        wait_until(lambda: reg.pending() == 0 and mirror.objects == expected, timeout=5)
    finally:
        informer.stop()

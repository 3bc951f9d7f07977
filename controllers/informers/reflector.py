"""The Reflector: keeps a store in step with the API server by LIST then WATCH (client-go
``tools/cache/reflector.go``).

One cycle (``list_and_watch``):

1. **LIST** at ``resource_version="0"`` the first time (served from the API server's watch cache),
   later at the last synced RV, and at ``""`` (a consistent read) once the server said that RV is
   gone (410) or too new. Pages of 500 (``limit``/``continue``); an expired ``continue`` token falls
   back to one unpaginated list. The result ``replace``-s the store (the DeltaFIFO turns missing
   keys into ``DeletedFinalStateUnknown`` tombstones).
2. **WATCH** from the last RV with ``allowWatchBookmarks`` and a random timeout of 5-10 minutes, so a
   fleet of informers does not reconnect in lockstep. Each event updates the store and the RV;
   a BOOKMARK only advances the RV. A watch that ends normally is reopened from the last RV.
   Connection refused or 429 when opening a watch: back off and watch again, without relisting.
   410 (the RV fell out of the server's window) or any other failure ends the cycle.

With ``use_watch_list`` (client-go's WatchListClient), step 1 is replaced by one streaming WATCH
with ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan``: the initial objects are buffered
until the BOOKMARK annotated ``k8s.io/initial-events-end: "true"``, then replace the store in one go,
and the same watch goes on. A server that rejects the request (4xx other than 410/429) makes the
reflector fall back to LIST for good.

``run`` repeats cycles until ``stop``, waiting a ``Backoff`` delay (0.8 s x2, jitter, cap 30 s,
reset after 2 min) between them -- so a relist after a 410 happens after a backoff, as upstream.
A resync thread calls ``store.resync()`` every ``resync_period`` when ``should_resync()`` agrees;
resync never talks to the API server.

Every step is reported to the observer: lists, watch start/end with reason, events, bookmarks,
backoffs and state changes (listing, relisting, watching, backing-off, stopped).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from controllers.clock import Clock, RealClock, StopSignal
from controllers.informers.backoff import Backoff
from controllers.informers.keys import object_key, resource_version
from controllers.informers.listwatch import INITIAL_EVENTS_END_ANNOTATION, ApiError, ListWatch, WatchStream
from controllers.observer import NOOP_OBSERVER, Observer, active_observer, listens
from controllers.schema import ReflectorState, WatchEndReason, WatchEventType

log = logging.getLogger("ctrlscope.reflector")

PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300.0

_OBJECT_EVENTS = frozenset({WatchEventType.ADDED, WatchEventType.MODIFIED, WatchEventType.DELETED})
_EVENT_TYPES: dict[str, WatchEventType] = {t.value: t for t in WatchEventType}
"""A watch event's wire ``type`` to its member (one dict lookup per event, cheaper than ``WatchEventType(t)``)."""


class ReflectorStore(Protocol):
    """What the reflector writes to (a DeltaFIFO in an informer, or a plain Store)."""

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, objs: Iterable[Any], resource_version: str) -> None: ...

    def resync(self) -> None: ...


class Reflector:
    """LIST + WATCH one resource into a store, with client-go's RV, retry and backoff rules."""

    def __init__(self, list_watch: ListWatch, store: ReflectorStore, *, name: str = "",
                 clock: Clock | None = None, observer: Observer | None = None,
                 resync_period: float = 0.0, should_resync: Callable[[], bool] | None = None,
                 page_size: int = PAGE_SIZE, min_watch_timeout: float = MIN_WATCH_TIMEOUT,
                 backoff: Backoff | None = None, rand: random.Random | None = None,
                 use_watch_list: bool = False) -> None:
        self.list_watch = list_watch
        self.store = store
        self.name = name or list_watch.describe()
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self._obs = active_observer(self.observer)
        self.resync_period = resync_period
        self.should_resync = should_resync
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.max_watch_timeout = 2 * min_watch_timeout
        self._rand = rand or random.Random()
        self.backoff = backoff or Backoff(clock=self.clock, rand=self._rand.random)
        self._lock = threading.Lock()
        self._last_sync_rv = ""
        # Set when the server said our RV is gone (410) or too new: the next LIST is a consistent
        # read (RV ""), cleared after a successful LIST.
        self._rv_unavailable = False
        # Set once a LIST at RV "0" came back paginated: keep paginating later relists too.
        self._paginated_result = False
        self._stop = StopSignal(self.clock)
        # Guards _watch so that stop() closes a watch opened concurrently.
        self._watch_lock = threading.Lock()
        self._watch: WatchStream | None = None
        self.lists = 0
        self.use_watch_list = use_watch_list
        # Last reported state, for snapshots; None until the first cycle starts.
        self.state: ReflectorState | None = None

    # -- resource versions ---------------------------------------------------------------------
    @property
    def last_sync_resource_version(self) -> str:
        """The RV of the last LIST, watch event or bookmark applied to the store."""
        with self._lock:
            return self._last_sync_rv

    def _set_rv(self, rv: str) -> None:
        with self._lock:
            self._last_sync_rv = rv

    def relist_resource_version(self) -> str:
        """RV for the next LIST: "0" first, the last synced RV later, "" after 410/too-large."""
        with self._lock:
            if self._rv_unavailable:
                return ""
            return self._last_sync_rv or "0"

    # -- lifecycle -----------------------------------------------------------------------------
    def run(self) -> None:
        """List and watch until ``stop``, backing off between cycles. Blocks."""
        resync = None
        if self.resync_period > 0:
            resync = threading.Thread(target=self._resync_loop, name=f"resync-{self.name}", daemon=True)
            resync.start()
        while not self._stop.stopped:
            reason = "watch ended"
            try:
                self.list_and_watch()
            except Exception as exc:  # noqa: BLE001 -- any failure means: back off, then relist
                reason = f"{type(exc).__name__}: {exc}"
                log.warning("reflector %s: %s", self.name, reason)
            if self._stop.stopped:
                break
            self._back_off(reason)
        self._state(ReflectorState.STOPPED)

    def stop(self) -> None:
        """Stop: interrupts an open watch and any backoff wait."""
        self._stop.stop()
        with self._watch_lock:
            watch = self._watch
        if watch is not None:
            watch.close()

    def _back_off(self, reason: str) -> None:
        delay = self.backoff.next()
        self._state(ReflectorState.BACKING_OFF)
        if self._obs is not None:
            self._obs.on_backoff(self.name, delay=delay, reason=reason)
        self._stop.wait(delay)

    def _state(self, state: ReflectorState) -> None:
        self.state = state
        if self._obs is not None:
            self._obs.on_reflector_state(self.name, state=state)

    def _resync_loop(self) -> None:
        while not self._stop.stopped:
            self._stop.wait(self.resync_period)
            if self._stop.stopped:
                return
            if self.should_resync is None or self.should_resync():
                self.store.resync()

    # -- one cycle -----------------------------------------------------------------------------
    def list_and_watch(self) -> None:
        """One LIST then WATCH until the watch must be abandoned (returns) or LIST fails (raises)."""
        if self.use_watch_list:
            try:
                self.watch(initial_events=True)
                return
            except ApiError as exc:
                if exc.is_expired or exc.is_too_many_requests or exc.code >= 500:
                    raise
                log.warning("reflector %s: streaming list unsupported (%s), falling back to LIST", self.name, exc)
                self.use_watch_list = False
        self.list()
        self.watch()

    def list(self) -> None:
        """LIST (paginated) and replace the store; raises ``ApiError``/``ConnectionError``."""
        rv = self.relist_resource_version()
        self._state(ReflectorState.RELISTING if self.lists else ReflectorState.LISTING)
        start = self.clock.now()
        try:
            try:
                items, list_rv, paginated = self._list_pages(rv)
            except ApiError as exc:
                if not (exc.is_expired or exc.is_too_large_resource_version):
                    raise
                with self._lock:
                    self._rv_unavailable = True
                rv = ""
                items, list_rv, paginated = self._list_pages(rv)
        except Exception as exc:
            if self._obs is not None:
                self._obs.on_list(self.name, resource_version=rv, items=0, duration=self.clock.now() - start,
                                  error=f"{type(exc).__name__}: {exc}")
            raise
        if rv == "0" and paginated:
            self._paginated_result = True
        self._replace(items, list_rv, start)

    def _replace(self, items: list[Any], rv: str, start: float) -> None:
        """A complete list (LIST or WatchList) arrived: replace the store and adopt its RV."""
        with self._lock:
            self._rv_unavailable = False
        self.store.replace(items, rv)
        self._set_rv(rv)
        self.lists += 1
        if self._obs is not None:
            self._obs.on_list(self.name, resource_version=rv, items=len(items), duration=self.clock.now() - start)

    def _list_pages(self, rv: str) -> tuple[list[Any], str, bool]:
        # An explicit RV other than "0" is served from the watch cache only unpaginated; upstream
        # therefore disables paging there unless the server paginated before.
        limit = self.page_size
        if rv not in ("", "0") and not self._paginated_result:
            limit = 0
        items: list[Any] = []
        list_rv = ""
        continue_token = ""
        paginated = False
        while True:
            try:
                page = self.list_watch.list(resource_version="" if continue_token else rv, limit=limit,
                                            continue_token=continue_token)
            except ApiError as exc:
                if not (exc.is_expired and continue_token):
                    raise
                # The continue token expired mid-list: start over with one full list.
                page = self.list_watch.list(resource_version=rv, limit=0, continue_token="")
                return page.items, page.resource_version, paginated
            items.extend(page.items)
            list_rv = list_rv or page.resource_version
            if not page.continue_token:
                return items, list_rv, paginated
            continue_token = page.continue_token
            paginated = True

    def watch(self, *, initial_events: bool = False) -> None:
        """Watch from the last RV until the cycle must end; reopens normally ended watches.

        With ``initial_events`` the first watch streams the initial state (WatchList) and the cycle
        ends if the stream closes before the initial-events-end bookmark."""
        while not self._stop.stopped:
            rv = self.relist_resource_version() if initial_events else self.last_sync_resource_version
            if initial_events and rv == "0":
                rv = ""
            timeout = int(self.min_watch_timeout + self._rand.random() * (self.max_watch_timeout - self.min_watch_timeout))
            # From before the request, as client-go's watch(): the server's timeoutSeconds runs from
            # when it got the request, so a watch it closes on time always lasts at least that long
            # here; timed from the answer's headers, a 1 s watch without events came out at 0.999 s
            # and was taken for a "very short watch" (a relist after a backoff).
            start = self.clock.now()
            try:
                stream = self.list_watch.watch(resource_version=rv, timeout_seconds=timeout,
                                               allow_watch_bookmarks=True, send_initial_events=initial_events)
            except ConnectionError as exc:
                self._back_off(f"watch failed: {type(exc).__name__}: {exc}")
                continue
            except ApiError as exc:
                if exc.is_too_many_requests:
                    self._back_off(f"watch failed: {exc}")
                    continue
                raise
            with self._watch_lock:
                if self._stop.stopped:
                    stream.close()
                    return
                self._watch = stream
            self._state(ReflectorState.WATCHING)
            if self._obs is not None:
                self._obs.on_watch_start(self.name, resource_version=rv)
            initial: dict[str, Any] | None = {} if initial_events else None
            try:
                reason, error = self._handle_watch(stream, start, initial)
                initial_events = initial_events and reason is WatchEndReason.INITIAL_EVENTS_INCOMPLETE
            finally:
                with self._watch_lock:
                    self._watch = None
                stream.close()
            if self._obs is not None:
                self._obs.on_watch_end(self.name, reason=reason, error=error)
            if reason is WatchEndReason.TOO_MANY_REQUESTS:
                self._back_off("watch returned 429")
                continue
            if reason is not WatchEndReason.CLOSED:
                return

    def _handle_watch(self, stream: WatchStream, start: float,
                      initial: dict[str, Any] | None = None) -> tuple[WatchEndReason, str | None]:
        """Apply a watch's events to the store; returns why the watch ended and, for an API error,
        its text. ``start``: the clock's time before the watch was requested. While ``initial`` is a dict (WatchList), events build the initial state there
        instead, until the initial-events-end bookmark."""
        count = 0
        store = self.store
        obs = self._obs
        # The per-event hook, or None when nobody listens to it (``listens``): no key to build.
        on_watch_event = obs.on_watch_event if listens(obs, "on_watch_event") else None
        try:
            for event in stream:
                if self._stop.stopped:
                    return WatchEndReason.STOPPED, None
                raw_type, obj = event
                etype = _EVENT_TYPES.get(raw_type)
                if etype is WatchEventType.ERROR:
                    raise ApiError.from_status(obj)
                rv = resource_version(obj)
                if initial is not None and etype in _OBJECT_EVENTS:
                    if etype is WatchEventType.DELETED:
                        initial.pop(object_key(obj), None)
                    else:
                        initial[object_key(obj)] = obj
                elif etype is WatchEventType.ADDED:
                    store.add(obj)
                elif etype is WatchEventType.MODIFIED:
                    store.update(obj)
                elif etype is WatchEventType.DELETED:
                    store.delete(obj)
                elif etype is WatchEventType.BOOKMARK:
                    if obs is not None:
                        obs.on_bookmark(self.name, resource_version=rv)
                    annotations = (obj.get("metadata") or {}).get("annotations") or {}
                    if initial is not None and annotations.get(INITIAL_EVENTS_END_ANNOTATION) == "true":
                        self._replace(list(initial.values()), rv, start)
                        initial = None
                else:
                    log.warning("reflector %s: unknown watch event type %r", self.name, raw_type)
                    continue
                if on_watch_event is not None and etype is not WatchEventType.BOOKMARK:
                    on_watch_event(self.name, event_type=etype, key=object_key(obj), resource_version=rv)
                # A str attribute store is atomic; readers never see a torn value.
                self._last_sync_rv = rv
                count += 1
        except ApiError as exc:
            if exc.is_expired:
                return WatchEndReason.EXPIRED, None
            if exc.is_too_many_requests:
                return WatchEndReason.TOO_MANY_REQUESTS, str(exc)
            return WatchEndReason.ERROR, str(exc)
        if self._stop.stopped:
            return WatchEndReason.STOPPED, None
        if initial is not None:
            return WatchEndReason.INITIAL_EVENTS_INCOMPLETE, None
        if count == 0 and self.clock.now() - start < 1.0:
            # Upstream treats this as an error (a server closing watches at once): relist after backoff.
            return WatchEndReason.VERY_SHORT, None
        return WatchEndReason.CLOSED, None

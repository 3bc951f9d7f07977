"""The list/watch client interface the Reflector talks to (client-go ``ListerWatcher``).

Two implementations: ``controllers.informers.http_client.KubernetesListWatch`` speaks the real
Kubernetes HTTP API (real clusters and the ctrlscope simulator); tests use an in-memory fake. Both
hand over raw object dicts and raise ``ApiError`` for API status errors (410 Gone/Expired, 429, 5xx)
and ``ConnectionError`` when the server cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

Obj = dict[str, Any]

INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"


class ApiError(Exception):
    """A Kubernetes API ``Status`` failure: HTTP ``code``, machine ``reason`` and ``message``."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}".strip())
        self.code = code
        self.reason = reason
        self.message = message

    @classmethod
    def from_status(cls, status: Obj) -> ApiError:
        """From a ``Status`` object (a watch ERROR event or an error response body)."""
        # A server's Status is input: a code that is not an integer (found by tests/fuzz: "code": "x"
        # raised ValueError in the reflector) is a 500, a reason or message that is not text is dropped.
        code, reason, message = status.get("code"), status.get("reason"), status.get("message")
        if isinstance(code, str) and code.isascii() and code.isdigit():
            code = int(code)
        return cls(code if type(code) is int and 100 <= code <= 599 else 500,
                   reason if isinstance(reason, str) else "", message if isinstance(message, str) else "")

    @property
    def is_expired(self) -> bool:
        """410 Gone / Expired: the requested resourceVersion is older than the server keeps."""
        return self.code == 410 or self.reason in ("Expired", "Gone")

    @property
    def is_too_large_resource_version(self) -> bool:
        """The requested resourceVersion is newer than the server's (a lagging apiserver)."""
        return "too large resource version" in self.message.lower() or self.reason == "ResourceVersionTooLarge"

    @property
    def is_too_many_requests(self) -> bool:
        return self.code == 429

    @property
    def is_not_found(self) -> bool:
        return self.code == 404

    @property
    def is_conflict(self) -> bool:
        """409: an optimistic-concurrency conflict (a stale resourceVersion), an apply conflict with
        another field manager, or a create of a name that exists (``is_already_exists``)."""
        return self.code == 409

    @property
    def is_already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"


@dataclass
class ListOptions:
    """What narrows a LIST and WATCH on the server (client-go ``metav1.ListOptions``, the part an
    informer's ``tweak_list_options`` may set): ``label_selector`` (``app=web,tier!=db``) and
    ``field_selector`` (``status.phase=Running``), both in the API server's own syntax, sent as
    given. An object whose labels stop matching leaves the informer as a DELETED event and one that
    starts matching enters as ADDED: the server does that, the informer just follows."""

    label_selector: str = ""
    field_selector: str = ""

    def query(self) -> list[tuple[str, str]]:
        """The query parameters these options add to a LIST or WATCH."""
        query = []
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        return query


@dataclass
class ListResult:
    """One LIST page: its items, the list's resourceVersion and the ``continue`` token ("" = last)."""

    items: list[Obj] = field(default_factory=list)
    resource_version: str = ""
    continue_token: str = ""


class WatchEvent(NamedTuple):
    """One decoded watch event: ``type`` as the server sent it (one of ``WatchEventType``'s values,
    compared by value; decoders keep the wire string), ``obj`` the raw dict."""

    type: str
    obj: Obj


class WatchStream(Protocol):
    """An open watch: iterate events until the server ends it; ``close`` from any thread stops it."""

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def close(self) -> None: ...


class ListWatch(Protocol):
    """LIST and WATCH one resource (optionally in one namespace)."""

    def list(self, *, resource_version: str, limit: int = 0, continue_token: str = "") -> ListResult:
        """One LIST request; ``limit`` 0 means unpaginated."""

    def watch(self, *, resource_version: str, timeout_seconds: int, allow_watch_bookmarks: bool = True,
              send_initial_events: bool = False) -> WatchStream:
        """Open a WATCH from ``resource_version``; with ``send_initial_events`` the current state
        is streamed first, ended by a BOOKMARK annotated ``k8s.io/initial-events-end``."""

    def describe(self) -> str:
        """Human-readable resource name for logs and the dashboard, e.g. ``apps/v1 Deployment``."""

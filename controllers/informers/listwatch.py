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

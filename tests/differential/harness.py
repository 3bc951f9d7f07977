"""The differential harness: one scripted conversation, played against two API servers, compared.

A *case* is a function of a :class:`Session`. It sends requests (``s.call``), opens watches
(``s.watch``) and runs clients; every response it wants compared is *recorded* under a label, after
:func:`normalize` has replaced what legitimately differs between any two servers (uids,
resourceVersions, timestamps, generated names, the namespace's name) by placeholders. The harness
plays each case against the simulator and against a real kube-apiserver, each in a fresh namespace of
the same name, and :func:`compare` lists the JSON paths where the two recordings differ.

Known differences live in ``docs/simulator-differences.md`` (one table: case, path, reason); the test
fails on any difference the table does not list, and on any row that no longer matches anything.
"""

from __future__ import annotations

import base64
import dataclasses
import fnmatch
import json
import re
import ssl
import tempfile
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from http.client import HTTPConnection, HTTPResponse, HTTPSConnection
from pathlib import Path
from typing import Any

import yaml

JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"

UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
AGE_CELL = re.compile(r"^\d+(ms|s|m|h|d)(\d+[smh])?$")
# Values of these keys differ between any two servers (or two runs of one).
VOLATILE_KEYS = {"uid": "<uid>", "resourceVersion": "<rv>", "creationTimestamp": "<time>",
                 "deletionTimestamp": "<time>", "time": "<time>", "lastTransitionTime": "<time>",
                 "lastUpdateTime": "<time>", "lastHeartbeatTime": "<time>", "startTime": "<time>",
                 "continue": "<continue>"}


@dataclasses.dataclass(frozen=True)
class Target:
    """One API server, as a kubeconfig describes it: where, which CA, which bearer token."""

    name: str
    server: str
    kubeconfig: Path
    token: str | None = None
    ca_file: Path | None = None

    @classmethod
    def from_kubeconfig(cls, name: str, path: Path) -> Target:
        config = yaml.safe_load(path.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next((u["user"] for u in config.get("users") or [] if u["name"] == context.get("user")), {})
        ca_file = None
        if cluster.get("certificate-authority-data"):
            handle = tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False)  # noqa: SIM115 -- kept for the run
            handle.write(base64.b64decode(cluster["certificate-authority-data"]))
            handle.close()
            ca_file = Path(handle.name)
        return cls(name, cluster["server"].rstrip("/"), path, user.get("token"), ca_file)

    def connect(self, timeout: float) -> HTTPConnection:
        url = urllib.parse.urlsplit(self.server)
        if url.scheme == "https":
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            return HTTPSConnection(url.hostname or "", url.port, timeout=timeout, context=context)
        return HTTPConnection(url.hostname or "", url.port, timeout=timeout)


@dataclasses.dataclass
class Response:
    status: int
    headers: dict[str, str]
    raw: bytes
    # Every Warning header, in order: a server sends one per warning, which ``headers`` would fold
    # into the last.
    warnings: tuple[str, ...] = ()

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.raw)
        except ValueError:
            return None

    @property
    def rv(self) -> str:
        return ((self.json or {}).get("metadata") or {}).get("resourceVersion", "")


def _content_type(value: str) -> str:
    """The media type and the parameters that matter (charset dropped)."""
    parts = [p.strip() for p in value.split(";") if p.strip() and not p.strip().startswith("charset")]
    return ";".join(parts)


class Session:
    """One case's conversation with one server, in namespace ``ns``; ``records`` is what it saw."""

    def __init__(self, target: Target, ns: str, workdir: Path) -> None:
        self.target = target
        self.ns = ns
        self.workdir = workdir
        self.records: dict[str, Any] = {}
        self.generated: dict[str, str] = {}

    # -- requests ------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, content_type: str | None = None,
                accept: str = JSON, headers: dict[str, str] | None = None, timeout: float = 15.0) -> Response:
        path = path.replace("{ns}", self.ns)
        data: bytes | None
        if body is None or isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
        sent = {"Accept": accept, **(headers or {})}
        if data is not None and content_type != "":
            sent["Content-Type"] = content_type or JSON
        if self.target.token:
            sent["Authorization"] = f"Bearer {self.target.token}"
        conn = self.target.connect(timeout)
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            raw = response.read()
            return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, raw,
                            tuple(v for k, v in response.getheaders() if k.lower() == "warning"))
        finally:
            conn.close()

    def call(self, label: str, method: str, path: str, body: Any = None, *, fields: tuple[str, ...] = (),
             **kwargs: Any) -> Response:
        """A request whose response is recorded under ``label``; with ``fields``, only those top-level
        fields of an object answered (``status`` is a controller's to write, at its own pace)."""
        response = self.request(method, path, body, **kwargs)
        self.record(label, self.describe(response, fields))
        return response

    def describe(self, response: Response, fields: tuple[str, ...] = ()) -> dict[str, Any]:
        described: dict[str, Any] = {"status": response.status,
                                     "contentType": _content_type(response.content_type)}
        if response.warnings:
            described["warnings"] = list(response.warnings)
        body = response.json
        if isinstance(body, dict) and body.get("kind") == "Status":
            described["body"] = status_gist(body)
        elif isinstance(body, dict) and fields:
            described["body"] = {k: v for k, v in body.items() if k in fields}
        elif body is not None:
            described["body"] = body
        elif response.raw.startswith(b"k8s\x00"):
            described["body"] = "<protobuf>"
        elif response.raw:
            described["body"] = f"<{len(response.raw.splitlines()) or 1} lines of text>"
        return described

    def record(self, label: str, value: Any) -> None:
        assert label not in self.records, f"label {label} recorded twice"
        self.records[label] = self.normalize(value)

    # -- watches -------------------------------------------------------------------------------
    def watch(self, label: str, path: str, *, during: Callable[[], None] | None = None, until: int | None = None,
              seconds: float = 3.0, accept: str = JSON, describe: Callable[[dict[str, Any]], Any] | None = None,
              ) -> list[dict[str, Any]]:
        """Open a watch, run ``during`` once it is established, read events until ``until`` of them
        arrived, the server ended the stream, or ``seconds`` passed; record the events."""
        events, status = self.stream(path, during=during, until=until, seconds=seconds, accept=accept)
        summary = [(describe or event_summary)(e) for e in events]
        self.record(label, {"status": status, "events": summary})
        return events

    def stream(self, path: str, *, during: Callable[[], None] | None = None, until: int | None = None,
               seconds: float = 3.0, accept: str = JSON) -> tuple[list[dict[str, Any]], int]:
        path = path.replace("{ns}", self.ns)
        headers = {"Accept": accept}
        if self.target.token:
            headers["Authorization"] = f"Bearer {self.target.token}"
        conn = self.target.connect(timeout=seconds + 5)
        events: list[dict[str, Any]] = []
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                body = response.read()
                events.append({"type": "HTTP", "object": json.loads(body) if body.startswith(b"{") else {}})
                return events, response.status
            if during is not None:
                threading.Thread(target=during, daemon=True).start()
            deadline = time.monotonic() + seconds
            for line in _lines(response, deadline):
                events.append(json.loads(line))
                if until is not None and len(events) >= until:
                    break
            return events, 200
        finally:
            conn.close()

    # -- clients -------------------------------------------------------------------------------
    def normalize(self, value: Any, key: str = "") -> Any:
        """Replace what differs between any two servers by placeholders (see the module docstring)."""
        if isinstance(value, dict):
            return {k: self.normalize(v, k) for k, v in value.items()}
        if isinstance(value, list) and key == "managedFields":
            # The server sorts entries by operation, then time (to the second), manager, apiVersion,
            # subresource. Times are placeholders here, so whether two writes fell into the same
            # second must not decide the order either: the entries are compared in the order they
            # would have if they had (an entry without a time still comes first).
            return sorted((self.normalize(v, key) for v in value), key=_entry_order)
        if isinstance(value, list):
            return [self.normalize(v, key) for v in value]
        if isinstance(value, tuple):
            return [self.normalize(v, key) for v in value]
        if isinstance(value, str):
            if key in VOLATILE_KEYS and value:
                return VOLATILE_KEYS[key]
            if value.startswith("-----BEGIN CERTIFICATE-----"):
                return "<certificate>"  # each cluster has its own CA
            if key == "cells" and AGE_CELL.match(value):
                return "<age>"  # a Table's Age column, a second apart on two servers
            if UID.match(value):
                return "<uid>"
            if TIME.match(value):
                return "<time>"
            for real, placeholder in self.generated.items():
                value = value.replace(real, placeholder)
            return value.replace(self.ns, "<ns>")
        return value

    def generated_name(self, name: str) -> None:
        """A server-chosen name (``generateName``), compared as a placeholder from now on."""
        self.generated[name] = f"<generated-{len(self.generated)}>"


def _entry_order(entry: Any) -> tuple[str, bool, str, str, str]:
    if not isinstance(entry, dict):
        return ("", False, "", "", "")
    return (str(entry.get("operation", "")), "time" in entry, str(entry.get("manager", "")),
            str(entry.get("apiVersion", "")), str(entry.get("subresource", "")))


def status_gist(status: dict[str, Any]) -> dict[str, Any]:
    """A Status as compared: everything but the wording of messages, of which only the head (up to
    the first colon: ``ConfigMap "a" is invalid``, ``Invalid value``) counts -- clients branch on
    reason, code and causes; the rest of a message is Go's error text."""
    gist = dict(status)
    if "message" in gist:
        gist["message"] = _head(gist["message"])
    details = gist.get("details")
    if isinstance(details, dict) and details.get("causes"):
        gist["details"] = dict(details, causes=[dict(c, message=_head(c.get("message", "")))
                                                for c in details["causes"]])
    return gist


def _head(message: str) -> str:
    return message.split(":", 1)[0]


def _lines(response: HTTPResponse, deadline: float) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked watch response, until it ends or the deadline passes."""
    sock = response.fp.raw._sock if hasattr(response.fp, "raw") else None  # type: ignore[union-attr]
    buffer = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if sock is not None:
            sock.settimeout(left)
        try:
            chunk = response.read1(65536)
        except TimeoutError:
            return
        if not chunk:
            if buffer.strip():
                yield buffer
            return
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            if line.strip():
                yield line


def event_summary(event: dict[str, Any]) -> Any:
    """A watch event as compared: its type and object's kind and name, a bookmark's annotations,
    an error's Status."""
    obj = event.get("object") or {}
    meta = obj.get("metadata") or {}
    if event.get("type") == "BOOKMARK":
        return ["BOOKMARK", obj.get("kind"), meta.get("annotations") or {}, sorted(meta)]
    if event.get("type") in ("ERROR", "HTTP"):
        return [event["type"], {k: obj.get(k) for k in ("kind", "status", "reason", "code")}]
    return [event.get("type"), obj.get("kind"), meta.get("name")]


# -- comparing ---------------------------------------------------------------------------------
def compare(sim: Any, real: Any, path: str = "") -> list[str]:
    """The paths where two recordings differ: ``a.b[2].c`` and what each side had."""
    if isinstance(sim, dict) and isinstance(real, dict):
        if sim.get("kind") != real.get("kind") and ("kind" in sim or "kind" in real):
            # Different kinds of answer (an object where the other server sent a Status): the kinds,
            # and the Status's reason, say it all.
            return [f"{path}.kind: sim {_short(_gist(sim))} != real {_short(_gist(real))}"]
        out: list[str] = []
        for key in sorted(set(sim) | set(real), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in sim:
                out.append(f"{sub}: missing on the simulator (real: {_short(real[key])})")
            elif key not in real:
                out.append(f"{sub}: only on the simulator ({_short(sim[key])})")
            else:
                out.extend(compare(sim[key], real[key], sub))
        return out
    if isinstance(sim, list) and isinstance(real, list):
        if len(sim) != len(real):
            return [f"{path}: {len(sim)} items on the simulator, {len(real)} on the real server "
                    f"(sim {_short(sim)}, real {_short(real)})"]
        return [d for i, (a, b) in enumerate(zip(sim, real, strict=True)) for d in compare(a, b, f"{path}[{i}]")]
    if sim != real:
        return [f"{path}: sim {_short(sim)} != real {_short(real)}"]
    return []


def _gist(body: dict[str, Any]) -> Any:
    return {k: body[k] for k in ("kind", "reason", "code") if k in body}


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


@dataclasses.dataclass(frozen=True)
class Known:
    """A row of docs/simulator-differences.md: case glob, path glob, reason."""

    case: str
    path: str
    reason: str

    def matches(self, case: str, difference: str) -> bool:
        path = difference.split(":", 1)[0]
        return fnmatch.fnmatchcase(case, self.case) and fnmatch.fnmatchcase(path, self.path)


def load_known(doc: Path) -> list[Known]:
    """The table rows of the differences page: ``| `case` | `path` | reason |``."""
    rows = []
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[1].startswith("`"):
            rows.append(Known(cells[0].strip("`"), cells[1].strip("`"), cells[2]))
    return rows


# -- running -----------------------------------------------------------------------------------
def namespace_for(case: str, token: str) -> str:
    return f"d{token}-{case.replace('_', '-')}"[:63].rstrip("-")


def play(target: Target, case: str, fn: Callable[[Session], None], token: str, workdir: Path) -> dict[str, Any]:
    """One case against one server in its own namespace; an exception is recorded, not raised."""
    ns = namespace_for(case, token)
    session = Session(target, ns, workdir)
    created = session.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": ns}})
    if created.status != 201:
        return {"<harness>": f"namespace {ns}: {created.status} {created.raw[:200]!r}"}
    # A namespace has settled once the control plane has published kube-root-ca.crt in it (a real
    # controller-manager does so a moment after the create, the simulator at once): a case that
    # lists or watches configmaps before then would race it.
    deadline = time.monotonic() + 15
    while session.request("GET", f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt").status != 200 \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        fn(session)
    except Exception as exc:  # noqa: BLE001 -- a case that breaks is itself a difference to report
        # Where it broke, for a case that breaks only under load (the innermost three frames).
        where = " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in
                           reversed(traceback.extract_tb(exc.__traceback__)[-3:]))
        session.records["<exception>"] = f"{type(exc).__name__}: {exc} (at {where})"
    return session.records


def play_all(targets: list[Target], cases: dict[str, Callable[[Session], None]], token: str, workdir: Path,
             parallel: int = 6, progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Every case against every target, ``parallel`` cases at a time per target:
    ``{case: {target name: records}}``."""
    from concurrent.futures import ThreadPoolExecutor

    results: dict[str, dict[str, Any]] = {name: {} for name in cases}
    with ThreadPoolExecutor(parallel * len(targets)) as pool:
        futures = {pool.submit(play, target, name, fn, token, workdir): (name, target.name)
                   for name, fn in cases.items() for target in targets}
        for done, (future, (name, target_name)) in enumerate(futures.items(), 1):
            results[name][target_name] = future.result()
            if progress and done % 20 == 0:
                progress(f"{done}/{len(futures)} case runs done")
    return results


def differences(results: dict[str, dict[str, Any]], sim: str = "sim", real: str = "real") -> dict[str, list[str]]:
    """Per case, the differences ``compare`` finds, each prefixed by its record's label."""
    out: dict[str, list[str]] = {}
    for name, by_target in results.items():
        found = [d if d.startswith("<") else d for d in compare(by_target.get(sim), by_target.get(real))]
        if found:
            out[name] = found
    return out

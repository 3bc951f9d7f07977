"""The scenario machinery: context (cluster client, fault client, clock, time scale), claims, results.

Timings in a scenario are written at demo speed (e.g. "50 % errors for 20 s") and multiplied by
``ScenarioContext.time_scale``: tests run the same script at 0.1–0.25× and still check the same claims.
All waiting and time-stamping goes through the context's ``clock`` (and the helpers here take one),
so a scenario's timing is as injectable as the runtime's.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from controllers.clock import Clock, RealClock, wall_ms
from controllers.examples.podset import API_VERSION, podset
from controllers.informers import ApiError
from controllers.sim.faults_client import SimFaults


@dataclass
class Claim:
    """One thing the narration promises, and whether it held."""

    text: str
    held: bool
    detail: str = ""


@dataclass
class ScenarioResult:
    name: str
    claims: list[Claim] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)
    # A results table for the scenarios page: {"columns": [...], "rows": [{"label", "cells": [...],
    # "claim": index of the claim the row measures, or None}]} (the first column is the row label).
    table: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return all(c.held for c in self.claims)

    def claim(self, text: str, held: bool, detail: str = "") -> None:
        self.claims.append(Claim(text, bool(held), detail))


class WorkerControl(Protocol):
    """Kill the worker running the controllers, and wait until it runs again."""

    def kill(self) -> None: ...

    def wait_restarted(self, timeout: float) -> bool: ...


class PidFileWorker:
    """The demo's supervised worker: its pid is in ``run/worker.pid``; the demo restarts it."""

    def __init__(self, pid_file: Path, *, clock: Clock | None = None) -> None:
        self.pid_file = pid_file
        self.clock: Clock = clock or RealClock()
        self._killed: int | None = None

    def _pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        pid = self._pid()
        if pid is None:
            raise RuntimeError(f"no worker pid in {self.pid_file}: is `make demo` running?")
        os.kill(pid, signal.SIGKILL)  # mid-flight, no clean shutdown: like a node or OOM kill
        self._killed = pid

    def wait_restarted(self, timeout: float) -> bool:
        deadline = self.clock.now() + timeout
        while self.clock.now() < deadline:
            pid = self._pid()
            if pid is not None and pid != self._killed:
                try:
                    os.kill(pid, 0)
                    return True
                except OSError:
                    pass
            self.clock.sleep(0.1)
        return False


class LeaseHolder:
    """Finds and kills the process holding a leader-election Lease (identities end in the pid)."""

    def __init__(self, client: Any, namespace: str, name: str) -> None:
        self.client = client
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"

    def holder(self) -> str:
        try:
            return (self.client.get_json(self.path).get("spec") or {}).get("holderIdentity") or ""
        except ApiError as exc:
            if exc.code == 404:
                return ""
            raise

    def kill(self) -> str:
        """SIGKILL the current holder (it cannot release the lease) and return its identity."""
        identity = self.holder()
        pid = identity.rsplit("-", 1)[-1]
        if not pid.isdigit():
            raise RuntimeError(f"lease holder {identity!r} does not end in a pid: is leader election on?")
        os.kill(int(pid), signal.SIGKILL)
        return identity


DEMO_STATE = "demo.json"
"""run/ file in which ``make demo`` describes its workers (replicas, leader election, Lease)."""
STANDBY_WANT = "standby.want"
"""run/ file whose presence asks ``make demo`` for a standby worker replica (removed: stop it)."""
STANDBY_WORKER = "demo-standby"
"""The standby replica's worker name."""
KOPF_WORKER = "kopf-podsets"
"""The worker name ``make demo`` runs the kopf PodSet operator (``controllers/examples/kopf_podsets.py``)
under, with ``manage.py runkopf``."""


class StandbyControl(Protocol):
    """Adds a standby worker replica for the length of a scenario."""

    def ensure_standby(self, timeout: float) -> bool:
        """Make sure a second replica campaigns with a synced cache; True if one was added."""

    def remove_standby(self) -> None: ...


class DemoStandby:
    """Asks a running ``make demo`` for a standby worker replica.

    The demo describes its workers in ``run/demo.json``; it starts worker ``demo-standby`` while
    ``run/standby.want`` exists and stops it (SIGTERM: a leading standby releases the Lease) once
    the file is gone. The standby is ready when its published components show every informer
    synced and its elector observing the Lease.
    """

    def __init__(self, run_dir: Path, telemetry: Callable[[str], Any], *, clock: Clock | None = None) -> None:
        self.run_dir = run_dir
        self.telemetry = telemetry  # worker name -> TelemetryReader
        self.clock: Clock = clock or RealClock()

    def _demo(self) -> dict[str, Any]:
        try:
            return json.loads((self.run_dir / DEMO_STATE).read_text())
        except (OSError, ValueError):
            raise RuntimeError("no running demo found (run/demo.json): start `make demo`") from None

    def ensure_standby(self, timeout: float) -> bool:
        demo = self._demo()
        if not demo.get("leader_election"):
            raise RuntimeError("the demo's workers run without leader election (a real cluster?): "
                               "start it with --replicas 2")
        if demo.get("replicas", 1) > 1:
            return False
        (self.run_dir / STANDBY_WANT).touch()
        reader = self.telemetry(STANDBY_WORKER)
        try:
            deadline = self.clock.now() + timeout
            while self.clock.now() < deadline:
                comps = reader.components()
                informers = [c for c in comps.values() if c.get("kind") == "informer"]
                leases = [c for c in comps.values() if c.get("kind") == "lease"]
                if informers and all(c.get("synced") for c in informers) and leases and leases[0].get("holder"):
                    return True
                self.clock.sleep(0.2)
        finally:
            reader.close()
        self.remove_standby()
        raise RuntimeError(f"the standby worker was not ready within {timeout:.0f} s (see run/logs/worker-standby.log)")

    def remove_standby(self) -> None:
        (self.run_dir / STANDBY_WANT).unlink(missing_ok=True)


@dataclass
class ScenarioContext:
    """What a scenario may use. ``say`` narrates to whoever runs it (console, dashboard)."""

    client: Any
    namespace: str = "default"
    time_scale: float = 1.0
    clock: Clock = field(default_factory=RealClock)
    say: Callable[[str], None] = print
    telemetry: Any = None  # a TelemetryReader for the worker running the controllers, if available
    kopf_telemetry: Any = None  # a TelemetryReader for the kopf operator's worker (KOPF_WORKER), if one runs
    workers: WorkerControl | None = None  # how to kill and await the worker, if the scenario needs it
    lease: LeaseHolder | None = None  # the leader-election Lease of replicated workers, if any
    standby: StandbyControl | None = None  # how to add a standby replica, if the scenario needs one
    actor: str = "scenario"  # who the simulator's fault log says injected the scenario's faults
    # For scenarios that start programs of their own against the cluster, published to the dashboard:
    kubeconfig: str | None = None  # the cluster's kubeconfig (the one ``client`` was made from)
    redis_url: str | None = None  # the dashboard's Redis
    prefix: str = "ctrlscope:"  # and its key prefix (CTRLSCOPE_PREFIX)

    @property
    def faults(self) -> SimFaults:
        return SimFaults(self.client, actor=self.actor)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of demo time (scaled by ``time_scale``)."""
        self.clock.sleep(seconds * self.time_scale)

    def wall_ms(self) -> float:
        """The clock's wall time in ms: the unit telemetry records are stamped in."""
        return wall_ms(self.clock)

    # -- PodSet helpers ------------------------------------------------------------------------
    def podsets_path(self) -> str:
        return f"/apis/{API_VERSION}/namespaces/{self.namespace}/podsets"

    def ensure_podset(self, name: str, implementation: str, replicas: int) -> None:
        try:
            self.client.send_json("POST", self.podsets_path(), podset(name, implementation, replicas,
                                                                     namespace=self.namespace))
        except ApiError as exc:
            if exc.code != 409:
                raise
            self.scale(name, replicas)

    def recreate_podset(self, name: str, implementation: str, replicas: int) -> None:
        """Delete ``name`` (and, by garbage collection, its pods) if it exists, then create it afresh,
        so a scenario run never inherits the drift a previous run left behind."""
        try:
            self.client.send_json("DELETE", f"{self.podsets_path()}/{name}")
        except ApiError as exc:
            if exc.code != 404:
                raise
        else:
            def gone() -> bool:
                try:
                    self.client.get_json(f"{self.podsets_path()}/{name}")
                    return False
                except ApiError as exc:
                    return exc.code == 404
            if self.wait_for(gone, timeout=30) is None:
                raise RuntimeError(f"PodSet {name} was not deleted within 30 s")
        self.ensure_podset(name, implementation, replicas)

    def scale(self, name: str, replicas: int) -> None:
        """Set ``spec.replicas`` with a conflict-retrying read-modify-write."""
        for _ in range(10):
            obj = self.client.get_json(f"{self.podsets_path()}/{name}")
            obj["spec"]["replicas"] = replicas
            try:
                self.client.send_json("PUT", f"{self.podsets_path()}/{name}", obj)
                return
            except ApiError as exc:
                if exc.code not in (409, 500):
                    raise
        raise RuntimeError(f"could not scale {name} after 10 attempts")

    def pods_of(self, name: str) -> list[str]:
        """Live (not terminating) pods owned by PodSet ``name``."""
        owner = self.client.get_json(f"{self.podsets_path()}/{name}")
        uid = owner["metadata"]["uid"]
        pods = self.client.get_json(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return sorted(p["metadata"]["name"] for p in pods
                      if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
                      and not p["metadata"].get("deletionTimestamp"))

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> float | None:
        """Seconds until ``predicate`` held (polling the API), or None after ``timeout`` (scaled)."""
        start = self.clock.now()
        deadline = start + timeout * max(self.time_scale, 0.2)
        while True:
            try:
                if predicate():
                    return self.clock.now() - start
            except ApiError:
                pass  # a fault may hit our own reads too
            if self.clock.now() > deadline:
                return None
            self.clock.sleep(0.05)


@dataclass(frozen=True)
class Scenario:
    """A named script with its narration; ``run`` returns the checked claims."""

    name: str
    title: str
    narration: tuple[str, ...]
    run: Callable[[ScenarioContext], ScenarioResult]
    # It injects the simulator's faults (``ctx.faults``, /_sim/): a real API server has none of them,
    # so it runs on the simulated cluster only (the demo on --real or --kubeconfig says so).
    needs_faults: bool = False

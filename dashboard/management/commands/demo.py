"""``python manage.py demo`` (what ``make demo`` runs): everything needed to watch controllers, on loopback.

Starts, in order: Redis (redisboot's rule), the database schema, the worker, and the dashboard under
daphne, then prints the URL. Ctrl-C (or SIGTERM) stops everything it started, in reverse order. If
any child dies, the demo says which one, shows the end of its log, stops the rest and exits non-zero.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from controllers.process import stop_process
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis, free_port


class Child:
    """A child process with its own log file under run/."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        with open(log, "ab") as fh:
            self.proc = subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=settings.BASE_DIR)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc)


class Command(BaseCommand):
    help = "Start Redis (if needed), the worker and the dashboard on loopback; Ctrl-C stops them all."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("CTRLSCOPE_PORT", "8000")),
                            help="dashboard port on 127.0.0.1 (default 8000; a free one if taken)")
        parser.add_argument("--rate", type=float, default=20.0,
                            help="synthetic observations per second from the worker (default 20)")

    def handle(self, *args, **opts):
        run_dir = Path(settings.RUN_DIR)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "logs").mkdir(exist_ok=True)
        try:
            redis_handle = ensure_redis(run_dir)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"redis:     {redis_handle.url} ({redis_handle.source})")
        call_command("migrate", verbosity=0, interactive=False)
        port = opts["port"] if _port_free(opts["port"]) else free_port()
        env = {**os.environ, "REDIS_URL": redis_handle.url, "CTRLSCOPE_DEMO": "1",
               "CTRLSCOPE_ALLOW_ANONYMOUS": "1", "PYTHONUNBUFFERED": "1"}
        py = sys.executable
        children: list[Child] = []
        stopping = False

        def stop_all(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop_all)
        signal.signal(signal.SIGTERM, stop_all)
        try:
            children.append(Child("worker", [py, "manage.py", "runcontrollers", "--synthetic", str(opts["rate"])],
                                  env, run_dir / "logs" / "worker.log"))
            children.append(Child("dashboard", [py, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                                "dashboard.asgi:application"], env, run_dir / "logs" / "dashboard.log"))
            url = f"http://127.0.0.1:{port}/"
            self._wait_http(url + "healthz", children)
            self.stdout.write(self.style.SUCCESS(f"dashboard: {url}"))
            self.stdout.write("access:    anonymous read-only is ON (CTRLSCOPE_ALLOW_ANONYMOUS=1), bound to loopback only")
            self.stdout.write(f"logs:      {run_dir / 'logs'}")
            self.stdout.write("Ctrl-C stops everything the demo started.")
            self.stdout.flush()
            while not stopping:
                for child in children:
                    if not child.alive():
                        raise CommandError(f"{child.name} exited with {child.proc.returncode}; "
                                           f"last lines of {child.log}:\n{child.tail()}")
                time.sleep(0.3)
        finally:
            for child in reversed(children):
                child.stop()
            redis_handle.stop()
            self.stdout.write("demo stopped.")

    def _wait_http(self, url: str, children: list[Child], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for child in children:
                if not child.alive():
                    raise CommandError(f"{child.name} exited during start-up:\n{child.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise CommandError(f"the dashboard did not answer at {url} within {timeout:.0f}s")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

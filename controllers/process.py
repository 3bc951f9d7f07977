"""Child processes: stopping them politely, and supervising a set of them like a node runs pods.

``stop_process`` is SIGTERM, a grace period, then SIGKILL. ``Child`` is one child process with its
own log file; ``Supervisor`` watches a set of children on one thread:

- children are started in order and stopped in reverse (a worker before the cluster it watches);
- a *supervised* child (one with a ``pid_file``, like a Deployment's pod) that exits is started again
  and its pid file names the new pid -- unless it crash-loops (``RESTART_LIMIT`` restarts within
  ``RESTART_WINDOW`` seconds); an unsupervised child that exits, or a crash-looping one, ends the
  supervision with ``ChildExited`` (a ``SupervisionError``), carrying the end of its log;
- a *standby* child runs while a want file exists: whoever needs a second replica (the
  leader-failover scenario) creates the file and removes it when done, and the supervisor starts the
  standby, or stops it with SIGTERM so that a leading standby releases its Lease on the way out.

Time goes through an injected ``Clock`` (restart windows, polling), so crash-loop detection is tested
with a fake one. Nothing here knows about Django: ``manage.py demo`` builds the children and turns
a ``SupervisionError`` into its error.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from controllers.clock import Clock, RealClock

RESTART_LIMIT = 5
"""Restarts within ``RESTART_WINDOW`` seconds after which a supervised child counts as crash-looping."""
RESTART_WINDOW = 60.0


def stop_process(proc: subprocess.Popen | None, grace: float = 10.0) -> None:
    """Terminate ``proc`` and wait for it; kill it if it ignores SIGTERM for ``grace`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class SupervisionError(Exception):
    """Supervision cannot go on; the message says why, for a person to read."""


class ChildExited(SupervisionError):
    """A child the supervisor could not keep running; the message names it and shows its log's end."""


class NotReady(SupervisionError):
    """What ``Supervisor.wait_ready`` waited for did not happen in time."""


class Child:
    """A child process with its own log file, started at construction.

    With ``pid_file`` it is supervised: ``restart_if_supervised`` starts it again after it died (the
    controller-restart scenario kills the worker on purpose), and the file names the live pid.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path, *, cwd: Path,
                 pid_file: Path | None = None, clock: Clock | None = None) -> None:
        self.name = name
        self.log = log
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.pid_file = pid_file
        self.clock: Clock = clock or RealClock()
        # Clock times of recent restarts, pruned to RESTART_WINDOW.
        self.restarts: list[float] = []
        self._start()

    def _start(self) -> None:
        with open(self.log, "ab") as fh:
            # Own session: Ctrl-C reaches only the parent, which then stops the children in reverse
            # start order, instead of all at once.
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.cwd, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        if self.pid_file is not None:
            self.pid_file.write_text(str(self.proc.pid))

    def relaunch(self) -> None:
        """Start the child again after it died, with the same command line, environment and log (its
        ports and data directories are in the arguments, so it comes back where it was)."""
        if self.alive():
            raise RuntimeError(f"{self.name} is still running (pid {self.proc.pid})")
        self._start()

    def restart_if_supervised(self) -> bool:
        """Start a dead supervised child again; False if unsupervised or crash-looping."""
        now = self.clock.now()
        self.restarts = [t for t in self.restarts if now - t < RESTART_WINDOW]
        if self.pid_file is None or len(self.restarts) >= RESTART_LIMIT:
            return False
        self.restarts.append(now)
        self._start()
        return True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc)
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)


class Supervisor:
    """Keeps a set of children running, restarts supervised ones, and hands a standby in and out.

    ``start`` adds children in order; ``wait_ready`` polls a readiness check during start-up; ``run``
    loops ``check`` until told to stop; ``stop_all`` stops every child in reverse order. The standby
    (``standby`` builds it, ``want_standby`` is the file that asks for it) is kept just before the
    last child started, so that it stops before the children it depends on. ``say`` reports each
    restart and hand-off in one line.
    """

    def __init__(self, *, clock: Clock | None = None, say: Callable[[str], None] = print,
                 want_standby: Path | None = None, standby: Callable[[], Child] | None = None,
                 interval: float = 0.3) -> None:
        self.clock: Clock = clock or RealClock()
        self.say = say
        self.want_standby = want_standby
        self.make_standby = standby
        self.interval = interval
        # In start order; stop_all walks it backwards.
        self.children: list[Child] = []
        self.standby: Child | None = None

    def start(self, child: Child) -> Child:
        self.children.append(child)
        return child

    def wait_ready(self, ready: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        """Poll ``ready()`` until true; raise ``ChildExited`` at once if a child dies meanwhile and
        ``NotReady`` (``what`` did not happen) after ``timeout`` seconds."""
        deadline = self.clock.now() + timeout
        while not ready():
            for child in self.children:
                if not child.alive():
                    raise ChildExited(f"{child.name} exited during start-up:\n{child.tail()}")
            if self.clock.now() > deadline:
                raise NotReady(f"{what} within {timeout:.0f}s")
            self.clock.sleep(0.1)

    def check(self) -> None:
        """One supervision pass: start or stop the standby as its want file says, restart dead
        supervised children; raise ``ChildExited`` for a child that cannot be kept running."""
        wanted = self.want_standby is not None and self.want_standby.exists()
        if self.standby is None:
            if wanted and self.make_standby is not None:
                self.standby = self.make_standby()
                self.children.insert(len(self.children) - 1, self.standby)
                self.say(f"standby:   {self.standby.name} started (pid {self.standby.proc.pid})")
        elif not wanted:
            self.children.remove(self.standby)
            self.standby.stop()
            self.say(f"standby:   {self.standby.name} stopped")
            self.standby = None
        for child in self.children:
            if child.alive():
                continue
            code = child.proc.returncode
            if not child.restart_if_supervised():
                raise ChildExited(f"{child.name} exited with {code}; last lines of {child.log}:\n{child.tail()}")
            self.say(f"{child.name} exited with {code}; restarted (pid {child.proc.pid})")

    def run(self, stopping: Callable[[], bool]) -> None:
        """``check`` every ``interval`` seconds until ``stopping()``; raises what ``check`` raises."""
        while not stopping():
            self.check()
            self.clock.sleep(self.interval)

    def stop_all(self) -> None:
        """Stop every child, last started first."""
        for child in reversed(self.children):
            child.stop()
        self.children.clear()
        self.standby = None


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when the parent dies, even by SIGKILL, so a
    killed parent never leaves a cluster, worker or server behind (the children have their own
    session, so they would not get the terminal's signals)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)

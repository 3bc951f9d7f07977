"""Stopping child processes politely: SIGTERM, a grace period, then SIGKILL."""

from __future__ import annotations

import subprocess


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

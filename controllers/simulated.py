"""How a client tells ctrlscope's simulated API server from a real one.

The simulator answers ``GET /version`` with ``gitCommit`` = ``SIMULATOR_GIT_COMMIT`` (a real API
server's is a 40-hex commit). A worker allows itself to write without ``--allow-writes`` only
against a server that says so (``controllers/informers/write_guard.py``): the simulator is a
sandbox, anything else may be production.
"""

from __future__ import annotations

from typing import Any

SIMULATOR_GIT_COMMIT = "ctrlscope-sim"


def is_simulated(version_info: Any) -> bool:
    """Whether a ``/version`` answer is the simulator's."""
    return isinstance(version_info, dict) and version_info.get("gitCommit") == SIMULATOR_GIT_COMMIT

"""A task that lives as long as the server's event loop: started once, cancelled on shutdown.

The kubelet and the control plane are both loops on the server's event loop (so they see the store
single-threaded, like every request); this is their shared start/stop lifecycle.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod


class BackgroundLoop(ABC):
    """Subclasses implement ``_run``; ``start`` schedules it, ``stop`` cancels and awaits it."""

    _task: asyncio.Task[None] | None = None

    @abstractmethod
    async def _run(self) -> None:
        """The loop body; runs until cancelled."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

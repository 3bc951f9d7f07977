"""A server that runs its asyncio loop on a thread of its own (the simulator, the fault proxy).

Tests and commands drive such a server from synchronous code: ``start`` runs ``start_async`` on a
fresh loop in a daemon thread and returns once it finished (raising what it raised), ``stop`` runs
``stop_async`` there and ends the thread, and ``call`` runs a function on the loop, where the
server's state lives, and returns its result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Self, TypeVar

T = TypeVar("T")


class LoopThread:
    """Mixin: ``start``/``stop``/``call`` and the context manager over ``start_async``/``stop_async``."""

    thread_name = "loop"
    start_timeout = 30.0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    async def start_async(self) -> None:
        raise NotImplementedError

    async def stop_async(self) -> None:
        raise NotImplementedError

    def new_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()

    def start(self) -> Self:
        """Serve on a background thread; returns once ``start_async`` is done (raises what it raised)."""
        ready: Future[None] = Future()

        def run() -> None:
            loop = self.new_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as e:
                self._loop = None
                ready.set_exception(e)
                loop.close()
                return
            ready.set_result(None)
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self._thread.start()
        ready.result(timeout=self.start_timeout)
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.stop_async(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        self._loop = self._thread = None

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop (its state is the loop's) and return its result."""
        loop = self._loop
        if loop is None:
            return fn()

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result(timeout=30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

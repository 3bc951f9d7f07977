"""Recording a session in a test: the recorder runs on a thread until the test's block ends, and the
block begins only once it has taken its snapshots. No head start or duration to guess on a loaded
machine: what the block publishes is recorded, and on the way out the recorder still records what it
finds in Redis, then stops."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from controllers.telemetry.recording import Recorder


@contextlib.contextmanager
def recording(redis_url: str, prefix: str, path: Path) -> Iterator[Recorder]:
    recorder = Recorder(redis_url, prefix=prefix)
    done = threading.Event()
    thread = threading.Thread(target=recorder.record, args=(path,), kwargs={"duration": None, "stop": done.is_set})
    thread.start()
    try:
        assert recorder.started.wait(30), "the recorder did not start"
        yield recorder
    finally:
        done.set()
        thread.join()

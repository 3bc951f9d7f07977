"""Per-process CPU and RSS, sampled while a benchmark runs: which process saturates first.

A benchmark with several processes in its pipeline (worker, Redis, daphne, clients) is limited by the
first one to use a whole core; the others then idle waiting for it. ``Measured`` is one such
process (or the Chromium processes this one started); ``Sampler`` samples a list of them from a
thread, so the benchmark's own loop is not disturbed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class Measured:
    """One process whose RSS and CPU a benchmark samples."""

    name: str
    pid: int  # 0: the headless Chromium processes this process started (browser, renderers, GPU...)
    samples: list[tuple[float, int]] = field(default_factory=list)  # (seconds since load start, RSS)
    # (seconds since load start, anonymous RSS): RSS less its file-backed and shared pages (a
    # mapped database file's pages the process touched, its binary's): what a leak grows.
    anon: list[tuple[float, int]] = field(default_factory=list)
    cpu_start: float = 0.0
    cpu_end: float = 0.0

    def procs(self) -> list[psutil.Process]:
        if self.pid:
            return [psutil.Process(self.pid)]
        return [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]

    def cpu(self) -> float:
        total = 0.0
        for p in self.procs():
            try:
                t = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
        return total

    def sample(self, at: float) -> int:
        rss = anon = 0
        for p in self.procs():
            try:
                info = p.memory_info()
            except psutil.NoSuchProcess:
                continue
            rss += info.rss
            anon += info.rss - getattr(info, "shared", 0)  # Linux: shared = RssFile + RssShmem
        self.samples.append((at, rss))
        self.anon.append((at, anon))
        return rss

    def rss_at(self, at: float, anonymous: bool = False) -> int:
        """The first sample at or after ``at`` seconds (``anonymous``: of the anonymous RSS)."""
        samples = self.anon if anonymous else self.samples
        return next((rss for t, rss in samples if t >= at), samples[-1][1])

    @property
    def rss_peak(self) -> int:
        return max(rss for _, rss in self.samples)


class Sampler:
    """Samples ``measured`` every ``every`` seconds from a thread; CPU is taken at start and stop.

    ``cpu_percent(m)`` is CPU seconds over the sampled window as % of one core (200 % = two cores).
    """

    def __init__(self, measured: list[Measured], every: float = 0.25) -> None:
        self.measured = measured
        self.every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t0 = self.t1 = 0.0

    def start(self) -> Sampler:
        self.t0 = time.monotonic()
        for m in self.measured:
            m.cpu_start = m.cpu()
            m.sample(0.0)
        self._thread = threading.Thread(target=self._run, name="procmeter", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            at = time.monotonic() - self.t0
            for m in self.measured:
                m.sample(at)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.t1 = time.monotonic()
        for m in self.measured:
            m.cpu_end = m.cpu()
            m.sample(self.t1 - self.t0)

    def cpu_percent(self, m: Measured) -> float:
        return 100.0 * (m.cpu_end - m.cpu_start) / max(1e-9, self.t1 - self.t0)

    def busiest(self) -> tuple[Measured, float]:
        m = max(self.measured, key=self.cpu_percent)
        return m, self.cpu_percent(m)

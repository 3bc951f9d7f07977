"""Synthetic observations: a load generator shaped like an informer's watch traffic.

``SyntheticLoad`` publishes ``rate`` records per second to one topic, each a watch-like event for one
of ``objects`` keys (mostly MODIFIED, with occasional DELETED/ADDED pairs), and keeps the topic's state
(key → latest resourceVersion and phase) in the snapshot. Every record carries a gap-free ``seq`` and
a wall-clock ``ts`` in ms, so a receiver can prove it got everything, in order, and measure latency.
It exists so the transport can be tested end to end without a cluster, and stays as the load
generator for benchmarks (``runcontrollers --synthetic RATE``).
"""

from __future__ import annotations

import random
import threading

from controllers.clock import Clock, RealClock, wall_ms
from controllers.schema import SYNTHETIC_TOPIC, RecordKind
from controllers.telemetry.publisher import RedisPublisher

PHASES = ("Pending", "ContainerCreating", "Running")
TICK = 0.01


class SyntheticLoad:
    """Publishes watch-shaped records at a steady rate (see module docstring)."""

    def __init__(self, publisher: RedisPublisher, rate: float, *, topic: str = SYNTHETIC_TOPIC,
                 objects: int = 200, clock: Clock | None = None, seed: int | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        if objects <= 0:
            raise ValueError(f"objects must be positive, got {objects}")
        self.publisher = publisher
        self.rate = rate
        self.topic = topic
        self.objects = objects
        self.clock = clock or RealClock()
        self._random = random.Random(seed)
        self.seq = 0
        self.rv = 1000
        self._live: set[int] = set()

    def step(self, n: int) -> None:
        """Publish ``n`` records now."""
        pub, rnd, topic = self.publisher, self._random, self.topic
        now_ms = wall_ms(self.clock)
        for _ in range(n):
            self.seq += 1
            self.rv += 1
            idx = rnd.randrange(self.objects)
            key = f"default/obj-{idx:05d}"
            if idx not in self._live:
                etype = "ADDED"
                self._live.add(idx)
            elif rnd.random() < 0.02:
                etype = "DELETED"
                self._live.discard(idx)
            else:
                etype = "MODIFIED"
            rv = str(self.rv)
            pub.publish(topic, {"k": RecordKind.WATCH, "type": etype, "key": key, "rv": rv, "seq": self.seq,
                                "ts": now_ms})
            pub.set_state(topic, key, None if etype == "DELETED" else
                          {"rv": rv, "phase": PHASES[self.seq % len(PHASES)]})

    def run(self, stop: threading.Event, duration: float | None = None) -> None:
        """Publish at ``rate`` until ``stop`` is set or ``duration`` seconds have passed."""
        start = self.clock.now()
        emitted = 0
        while not stop.is_set():
            elapsed = self.clock.now() - start
            if duration is not None and elapsed >= duration:
                break
            due = int(self.rate * elapsed) - emitted
            if due > 0:
                self.step(due)
                emitted += due
            stop.wait(TICK)

"""Publishers under load in processes of their own, driven over their stdin and stdout.

The Redis Cluster test at the issue's scale (50 publishers × 20 topics at 20,000 observations/s,
10 websocket clients) does not fit one Python process: the producing loop, the publishers' flush
threads and the clients' decoding would share one GIL, and the test would measure that, not the
transport. ``PublisherGroup`` splits the publishers over ``procs`` child processes (``python -m
tests.telemetry.publisher_group``), each producing its share of the rate on its own topics, and the
test keeps the clients.

The child reads one JSON line of configuration, starts its publishers and producer, and answers one
JSON line per command line: ``stats`` (live counters: connected, frames published and lost) and
``stop`` (stop producing, wait until every publisher has sent or reported everything, then the final
report: per topic how many observations were produced, the last frame's seq and the state; per
publisher its name and loss counters). Everything the test asserts on comes from those reports, so a
publisher in a child is judged exactly like one in the test's process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class PublisherReport:
    """One publisher, as its child reported it when it stopped."""

    name: str
    records_lost: int
    records_dropped: int
    frames_lost: int
    redirects: dict[str, int]
    alive: bool  # connected, its flush thread running


@dataclass
class GroupReport:
    produced: dict[str, int] = field(default_factory=dict)  # topic → observations produced
    last_seq: dict[str, int] = field(default_factory=dict)  # topic → the seq of its last frame
    state: dict[str, dict[str, Any]] = field(default_factory=dict)  # topic → its publisher's state
    publishers: dict[int, PublisherReport] = field(default_factory=dict)  # by publisher index


class PublisherGroup:
    """``topics`` (topic → publisher index) published at ``rate`` observations/s in all, by
    ``procs`` child processes; each observation is a record ``{"seq": i}`` and a state key
    ``k{i % 20}`` set to it, as the in-process load of the test did."""

    def __init__(self, url: str, prefix: str, topics: dict[str, int], *, rate: int, procs: int = 1,
                 flush_interval: float = 0.02, log_dir: Path | None = None) -> None:
        publishers = sorted(set(topics.values()))
        procs = max(1, min(procs, len(publishers)))
        self._configs = []
        for n in range(procs):
            mine = {t: j for t, j in topics.items() if publishers.index(j) % procs == n}
            self._configs.append({"url": url, "prefix": prefix, "topics": mine, "flush_interval": flush_interval,
                                  "rate": rate * len(mine) / len(topics)})
        self._log_dir = log_dir
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def start(self) -> PublisherGroup:
        for n, cfg in enumerate(self._configs):
            log = open(self._log_dir / f"publishers-{n}.log", "wb") if self._log_dir else subprocess.DEVNULL  # noqa: SIM115
            proc = subprocess.Popen([sys.executable, "-m", "tests.telemetry.publisher_group"], cwd=ROOT,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
            proc.stdin.write(orjson.dumps(cfg) + b"\n")
            proc.stdin.flush()
            self._procs.append(proc)
        return self

    def _ask(self, command: str, timeout: float) -> list[dict[str, Any]]:
        """Send ``command`` to every child and read each one's JSON line (a child that exits or says
        nothing within ``timeout`` fails the test with what it wrote to its log)."""
        with self._lock:
            for proc in self._procs:
                proc.stdin.write(command.encode() + b"\n")
                proc.stdin.flush()
            replies: list[dict[str, Any] | None] = [None] * len(self._procs)

            def read(i: int) -> None:
                line = self._procs[i].stdout.readline()
                replies[i] = orjson.loads(line) if line else None

            readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(self._procs))]
            for r in readers:
                r.start()
            for r in readers:
                r.join(timeout)
            for i, reply in enumerate(replies):
                if reply is None:
                    raise AssertionError(f"publisher process {i} did not answer {command!r} within {timeout} s "
                                         f"(exit code {self._procs[i].poll()}; its log: {self._log_dir})")
            return replies  # type: ignore[return-value]

    def stats(self) -> dict[str, Any]:
        """Live counters over all children: every publisher connected and publishing, frames lost."""
        replies = self._ask("stats", 15)
        return {"ready": all(r["ready"] for r in replies), "frames_lost": sum(r["frames_lost"] for r in replies)}

    def stop(self, timeout: float = 60.0) -> GroupReport:
        """Stop producing, wait for every publisher to drain, and return what they reported."""
        report = GroupReport()
        for reply in self._ask("stop", timeout):
            report.produced.update(reply["produced"])
            report.last_seq.update(reply["last_seq"])
            report.state.update(reply["state"])
            for j, p in reply["publishers"].items():
                report.publishers[int(j)] = PublisherReport(**p)
        self.close()
        return report

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for proc in self._procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._procs = []


def _child() -> None:
    from controllers.telemetry.publisher import RedisPublisher

    cfg = orjson.loads(sys.stdin.buffer.readline())
    topics: dict[str, int] = cfg["topics"]
    pubs = {j: RedisPublisher(cfg["url"], prefix=cfg["prefix"], flush_interval=cfg["flush_interval"])
            for j in sorted(set(topics.values()))}
    of = {t: pubs[j] for t, j in topics.items()}
    produced = dict.fromkeys(topics, 0)
    stop = threading.Event()
    for pub in pubs.values():
        pub.start()

    def produce() -> None:
        start = time.monotonic()
        n = 0
        names = list(topics)
        rate = cfg["rate"]
        while not stop.is_set():
            due = int((time.monotonic() - start) * rate)
            while n < due:
                topic = names[n % len(names)]
                i = produced[topic]
                of[topic].publish(topic, {"seq": i})
                of[topic].set_state(topic, f"k{i % 20}", {"seq": i})
                produced[topic] = i + 1
                n += 1
            time.sleep(0.005)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()

    def reply(obj: Any) -> None:
        sys.stdout.buffer.write(orjson.dumps(obj) + b"\n")
        sys.stdout.buffer.flush()

    for line in sys.stdin.buffer:
        command = line.strip().decode()
        if command == "stats":
            reply({"ready": all(p.connected and p.frames_published for p in pubs.values()),
                   "frames_lost": sum(p.frames_lost for p in pubs.values())})
        elif command == "stop":
            stop.set()
            producer.join(5)
            deadline = time.monotonic() + 60
            while any(p._inflight is not None or p._buffer for p in pubs.values()) and time.monotonic() < deadline:
                time.sleep(0.02)
            reply({
                "produced": produced,
                "last_seq": {t: of[t]._topics[t].seq for t in topics},
                "state": {t: of[t].state(t) for t in topics},
                "publishers": {str(j): {"name": p.name, "records_lost": p.records_lost, "records_dropped": p.records_dropped,
                                   "frames_lost": p.frames_lost,
                                   "redirects": dict(p._router.redirects) if p._router else {},
                                   "alive": bool(p.connected and p._thread is not None and p._thread.is_alive()
                                                 and p._inflight is None and not p._buffer)}
                               for j, p in pubs.items()},
            })
            break
        else:
            reply({"error": f"unknown command {command!r}"})
    for pub in pubs.values():
        pub.stop()


if __name__ == "__main__":
    _child()

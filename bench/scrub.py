"""Secret scrubbing cost per outgoing string, with 1,000 cached Secrets.

Every frame, state value and inspector answer passes through ``SecretScrubber.scrub_json`` before it
is framed (``controllers/telemetry/scrub.py``). This measures, per string, the scrubber against the
obvious peer -- a loop of ``in`` + ``str.replace`` over every known value form -- and next to what the
publisher already pays for the same string (``orjson.dumps``), for clean strings (the common case)
and for strings holding a value (decoded, masked, re-encoded). It also times the automaton rebuild
after one Secret changed. Run: ``python bench/scrub.py [--secrets 1000] [--seconds 1]``.
"""

from __future__ import annotations

import argparse
import base64
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controllers.telemetry.scrub import RECENT_LIMIT, SecretScrubber  # noqa: E402


def make_secret(i: int) -> dict[str, Any]:
    values = {"password": secrets.token_urlsafe(18), "token": secrets.token_hex(20), "username": "admin",
              "dsn": f"postgres://app:{secrets.token_urlsafe(12)}@db-{i}.prod.svc:5432/app"}
    return {"kind": "Secret", "metadata": {"namespace": f"team-{i % 20}", "name": f"creds-{i}", "uid": f"uid-{i}"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}}


def samples(leak: str) -> dict[str, bytes]:
    record = {"k": "reconcile", "key": "team-3/web-7", "worker": 0, "attempt": 4, "duration": 0.0123,
              "result": "error", "error": "Conflict: the object has been modified; please apply your changes",
              "ts": 1764633600000.123}
    frame = {"r": [dict(record, attempt=i) for i in range(40)], "v": "1.1", "ts": 1764633600000.5,
             "src": "host-42-a1b2c3", "seq": 17, "s": {f"team-3/web-{i}": {"attempts": i, "result": "success"}
                                                        for i in range(20)}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-7", "namespace": "team-3",
                                                           "labels": {"app": "web"}, "uid": "u" * 36},
           "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.2.3",
                                    "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(40)]}]}}
    out = {
        "record (one reconcile)": orjson.dumps({"r": [record], "v": "1.1", "ts": 1.0, "src": "h", "seq": 1}),
        "frame (40 records, 20 state)": orjson.dumps(frame),
        "inspector answer (Pod)": orjson.dumps({"status": 200, "current": pod}),
    }
    leaky = dict(record, error=f"login refused for password={leak}")
    out["record holding a value"] = orjson.dumps({"r": [leaky], "v": "1.1", "ts": 1.0, "src": "h", "seq": 1})
    return out


class ReplaceLoop:
    """The peer: every known form, tried one by one with ``in`` and ``str.replace``."""

    def __init__(self, scrubber: SecretScrubber) -> None:
        self.pairs = [(orjson.dumps(p)[1:-1], orjson.dumps(label)[1:-1]) for p, label in scrubber._merged().items()]

    def __call__(self, data: bytes) -> bytes:
        for pattern, mask in self.pairs:
            if pattern in data:
                data = data.replace(pattern, mask)
        return data


def per_call(fn: Callable[[], Any], seconds: float) -> float:
    """Microseconds per call, best of three runs of ``seconds / 3``."""
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.perf_counter()
        deadline = start + seconds / 3
        while True:
            for _ in range(20):
                fn()
            n += 20
            now = time.perf_counter()
            if now >= deadline:
                break
        best = min(best, (now - start) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--secrets", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = parser.parse_args()
    scrubber = SecretScrubber()
    cached = [make_secret(i) for i in range(args.secrets)]
    scrubber.learn_all(cached)
    start = time.perf_counter()
    patterns = scrubber.pattern_count
    first_build = time.perf_counter() - start
    peer = ReplaceLoop(scrubber)
    leak = base64.b64decode(cached[args.secrets // 2]["data"]["password"]).decode()
    print(f"{args.secrets:,} cached Secrets, {patterns:,} patterns (values of >= {scrubber.min_length} chars, "
          f"decoded + base64 padded/unpadded); first automaton build {first_build * 1000:.1f} ms")
    print()
    print(f"{'outgoing string':30} {'bytes':>7} {'orjson.dumps':>13} {'scrubber':>10} {'replace loop':>13} "
          f"{'scrubber vs peer':>17}")
    for name, data in samples(leak).items():
        obj = orjson.loads(data)
        dumps = per_call(lambda o=obj: orjson.dumps(o), args.seconds)
        ours = per_call(lambda d=data: scrubber.scrub_json(d), args.seconds)
        theirs = per_call(lambda d=data: peer(d), args.seconds)
        assert (b"<redacted" in scrubber.scrub_json(data)) == ("value" in name), name
        print(f"{name:30} {len(data):7,} {dumps:10.2f} µs {ours:7.2f} µs {theirs:10.1f} µs {theirs / ours:15.0f}×")
    changed = make_secret(args.secrets // 2)

    def one_changed() -> None:
        changed["data"]["password"] = base64.b64encode(secrets.token_bytes(18)).decode()
        scrubber.learn(changed)  # new values: the small automaton is rebuilt, the big one merged past RECENT_LIMIT
        scrubber.scrub_json(b'{"r":[]}')

    print()
    print(f"a Secret changed, then a string scrubbed: {per_call(one_changed, args.seconds) / 1000:.2f} ms on average "
          f"(the small automaton rebuilt; every {RECENT_LIMIT} new forms a full merge like the first build)")


if __name__ == "__main__":
    main()

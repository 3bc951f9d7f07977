"""The fuzzing tier (``tests/fuzz``) with a big budget, and a table per target.

CI runs every property with its small ``fuzz-ci`` budget (about a minute for the tier). This runs the
same properties under the ``fuzz-long`` profile: random seeds, the example database on (a crash
found once is tried first next time), and as many examples as the budget allows:

    python bench/fuzz.py --minutes 10          # the time split evenly over the targets
    python bench/fuzz.py --examples 5000       # a fixed count per property
    python bench/fuzz.py --minutes 2 --target websocket --target kubeconfig

With ``--minutes``, each target runs in rounds (one pytest run each, a fresh seed) sized from the
rate of the first, until its share of the time is spent. The table: examples run, failed
properties, distinct kinds of clean error seen (numbers and quoted values blanked), examples/s of the
property bodies. A failure prints hypothesis' minimal example; add it to the target as an
``@example`` once fixed (the tier's rule: every crash found becomes a regression test).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "tests" / "fuzz"
TARGETS = sorted(p.stem.removeprefix("test_fuzz_") for p in FUZZ.glob("test_fuzz_*.py"))
FIRST_ROUND = 300  # examples per property in a target's first timed round


def run_round(target: str, examples: int, log: Path) -> dict:
    """One pytest run of ``target``'s properties with ``examples`` each; its tally (``conftest.py``)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        stats_path = f.name
    env = {**os.environ, "CTRLSCOPE_FUZZ_PROFILE": "fuzz-long", "CTRLSCOPE_FUZZ_EXAMPLES": str(examples),
           "CTRLSCOPE_FUZZ_STATS": stats_path, "CTRLSCOPE_DEMO": "1"}
    with open(log, "ab") as out:
        subprocess.run([sys.executable, "-m", "pytest", str(FUZZ / f"test_fuzz_{target}.py"), "-q", "-p",
                        "no:cacheprovider", "--hypothesis-seed", str(int.from_bytes(os.urandom(4), "big")),
                        "-o", "timeout=0"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        with open(stats_path) as f:
            return json.load(f).get(target, {})
    except (OSError, ValueError):
        return {}
    finally:
        os.unlink(stats_path)


def merge(total: dict, part: dict) -> None:
    total["examples"] = total.get("examples", 0) + part.get("examples", 0)
    total["failures"] = total.get("failures", 0) + part.get("failures", 0)
    total["seconds"] = total.get("seconds", 0.0) + part.get("seconds", 0.0)
    total.setdefault("errors", Counter()).update(part.get("errors", {}))


def fuzz_target(target: str, *, seconds: float | None, examples: int | None, log: Path) -> dict:
    total: dict = {"rounds": 0}
    if examples is not None:
        merge(total, run_round(target, examples, log))
        total["rounds"] = 1
        return total
    assert seconds is not None
    deadline = time.monotonic() + seconds
    size = FIRST_ROUND
    while True:
        started = time.monotonic()
        merge(total, run_round(target, size, log))
        total["rounds"] += 1
        took = time.monotonic() - started
        left = deadline - time.monotonic()
        if left < 5 or total.get("failures"):
            return total
        # Size the next round to the time left (a round's cost is its start-up plus its examples).
        size = max(50, int(size * min(left / max(took, 0.1), 20) * 0.9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, help="total time, split evenly over the targets (default 10)")
    budget.add_argument("--examples", type=int, help="examples per property, in one round per target")
    parser.add_argument("--target", action="append", choices=TARGETS, help="only these targets (repeatable)")
    args = parser.parse_args()
    targets = args.target or TARGETS
    minutes = args.minutes if args.minutes is not None or args.examples is not None else 10.0
    share = minutes * 60 / len(targets) if minutes else None
    log = Path(tempfile.mkdtemp(prefix="ctrlscope-fuzz-")) / "pytest.log"
    print(f"fuzzing {', '.join(targets)}: " + (f"{minutes:g} min" if share else f"{args.examples} examples/property")
          + f"; pytest output in {log}", flush=True)
    rows = []
    for target in targets:
        stats = fuzz_target(target, seconds=share, examples=args.examples, log=log)
        rate = stats.get("examples", 0) / stats["seconds"] if stats.get("seconds") else 0.0
        rows.append((target, stats.get("rounds", 0), stats.get("examples", 0), stats.get("failures", 0),
                     len(stats.get("errors", {})), rate))
        print(f"  {target}: {rows[-1][2]} examples, {rows[-1][3]} failures", flush=True)
    print()
    print(f"{'target':<15} {'rounds':>6} {'examples':>9} {'failures':>8} {'distinct errors':>15} {'examples/s':>10}")
    for target, rounds, n, failures, distinct, rate in rows:
        print(f"{target:<15} {rounds:>6} {n:>9} {failures:>8} {distinct:>15} {rate:>10.1f}")
    if any(r[3] for r in rows):
        print(f"\nfailures: see {log} for the minimal examples")
        sys.exit(1)


if __name__ == "__main__":
    main()

"""Flake hunt: every browser test (``tests/**/*_browser.py``), N times in a row, with a benchmark
loading the machine the whole time.

A race that a quiet machine hides shows up when the CPUs are busy: a thread scheduled late, a page
that subscribes after the data it waits for, a deadline that was really a guess. The load is a named
benchmark run back to back in the background (``bench/informer.py`` by default: an HTTP server and
the informer contenders, on every CPU) from before the first loop to after the last.

Each loop is one pytest run of all the browser test files (``--junitxml`` per loop, its output in
``run/browser-loop/loop-N.log``). It prints a line per loop (pass/fail, duration, what failed) and,
at the end, a table of the tests that failed with the loops they failed in. Exit status 0 only when
every loop passed.

Run: ``python bench/browser_loop.py [-n LOOPS] [--load informer|transport|none] [-- PYTEST_ARGS]``.
``CTRLSCOPE_GO`` is taken from ``scripts/go-toolchain`` when unset, as ``make test`` does (the Go
samples' browser tests skip without it).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "run" / "browser-loop"
# The benchmarks that load the machine, each a command run again as soon as it ends.
LOADS = {
    "informer": [sys.executable, "bench/informer.py", "-n", "20000", "--runs", "1", "--skip-official"],
    "transport": [sys.executable, "bench/transport.py", "--duration", "10"],
}


def browser_tests() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*_browser.py"))


def go_binary() -> str:
    """What ``make test`` passes as CTRLSCOPE_GO: scripts/go-toolchain's answer, or empty."""
    if os.environ.get("CTRLSCOPE_SKIP_GO") == "1" or not (ROOT / "go" / "go.mod").exists():
        return ""
    found = subprocess.run([str(ROOT / "scripts" / "go-toolchain")], cwd=ROOT, capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else ""


class Load:
    """A benchmark run back to back in its own process group until stopped; counts its runs."""

    def __init__(self, name: str, log: Path) -> None:
        self.name = name
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.name == "none":
            return
        cmd = " ".join(LOADS[self.name])
        script = f"n=0; while true; do {cmd}; n=$((n+1)); echo \"== load run $n done\"; done"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def runs(self) -> int:
        return self.log.read_text(errors="replace").count("== load run ") if self.log.exists() else 0

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the group this class started, nothing else
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def outcomes(junit: Path) -> tuple[int, list[str]]:
    """(tests run, ids of those failed or errored) from a pytest junit XML file."""
    if not junit.exists():
        return 0, ["<no junit report: pytest did not finish>"]
    failed: list[str] = []
    cases = ET.parse(junit).getroot().iter("testcase")
    n = 0
    for case in cases:
        n += 1
        if case.find("failure") is not None or case.find("error") is not None:
            path = case.get("classname", "").replace(".", "/")
            failed.append(f"{path}.py::{case.get('name')}")
    return n, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--loops", type=int, default=20)
    parser.add_argument("--load", choices=[*LOADS, "none"], default="informer", help="the benchmark run meanwhile")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CTRLSCOPE_DEMO": "1"}
    env.setdefault("CTRLSCOPE_GO", go_binary())
    tests = browser_tests()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"{len(tests)} browser test files at {commit or '?'}, {args.loops} loops, load: {args.load}"
          f" ({' '.join(LOADS[args.load][1:]) if args.load != 'none' else 'none'}), CTRLSCOPE_GO={env['CTRLSCOPE_GO'] or '(none)'}",
          flush=True)
    load = Load(args.load, OUT / "load.log")
    load.start()
    failures: dict[str, list[int]] = defaultdict(list)
    durations: list[float] = []
    passed_loops = 0
    began = time.monotonic()
    try:
        for i in range(1, args.loops + 1):
            junit = OUT / f"loop-{i}.xml"
            junit.unlink(missing_ok=True)
            t0 = time.monotonic()
            with open(OUT / f"loop-{i}.log", "wb") as log:
                rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(junit),
                                     *tests, *args.pytest_args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
            took = time.monotonic() - t0
            durations.append(took)
            n, failed = outcomes(junit)
            if rc not in (0, 1) and not failed:
                failed = [f"<pytest exit {rc}>"]
            for test in failed:
                failures[test].append(i)
            passed_loops += not failed and rc == 0
            status = "PASS" if not failed and rc == 0 else "FAIL"
            print(f"loop {i:>3}/{args.loops}: {status}  {n} tests  {took:6.0f} s  load runs so far {load.runs()}"
                  + "".join(f"\n      failed: {t}" for t in failed), flush=True)
    finally:
        load.stop()
    total = time.monotonic() - began
    print(f"\n{passed_loops}/{len(durations)} loops passed in {total / 60:.1f} min "
          f"(per loop {min(durations, default=0):.0f}-{max(durations, default=0):.0f} s, "
          f"mean {sum(durations) / max(len(durations), 1):.0f} s); load {args.load}: {load.runs()} runs completed")
    if failures:
        print(f"\n{'failures':>8}  {'test':<90} loops")
        for test, loops in sorted(failures.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"{len(loops):>8}  {test:<90} {','.join(map(str, loops))}")
        print(f"\nlogs: {OUT.relative_to(ROOT)}/loop-N.log")
    return 0 if passed_loops == len(durations) else 1


if __name__ == "__main__":
    sys.exit(main())

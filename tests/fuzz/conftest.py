"""The fuzzing tier (``budget.py`` holds its profiles and checks): writes the per-target tally for
``bench/fuzz.py`` when ``CTRLSCOPE_FUZZ_STATS`` names a file."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from tests.fuzz import budget

_CALL_SECONDS: Counter[str] = Counter()
_FAILED: Counter[str] = Counter()


def _target(nodeid: str) -> str:
    return nodeid.split("::")[0].rsplit("/", 1)[-1].removeprefix("test_fuzz_").removesuffix(".py")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _CALL_SECONDS[_target(report.nodeid)] += report.duration
    if report.failed:
        _FAILED[_target(report.nodeid)] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("CTRLSCOPE_FUZZ_STATS")
    if not path:
        return
    targets = sorted(set(_CALL_SECONDS) | set(budget.EXAMPLES))
    stats = {t: {"examples": budget.EXAMPLES[t], "failures": _FAILED[t], "seconds": _CALL_SECONDS[t],
                 "errors": dict(budget.ERRORS.get(t, {}))} for t in targets}
    with open(path, "w") as out:
        json.dump(stats, out)

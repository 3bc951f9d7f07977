"""The fuzzing tier's budget, its bookkeeping and the checks every target shares.

Two hypothesis profiles: ``fuzz-ci`` (the default: the whole tier in about a minute, for ``make
test``) and ``fuzz-long`` (what ``bench/fuzz.py`` runs: ``CTRLSCOPE_FUZZ_EXAMPLES`` examples per
property, random seeds, the example database on so that a crash found once is replayed first). Each
property names its CI example count with ``budget(n)``; the profile, never the test, decides how far
to go. The profiles are applied per property (``settings(parent=...)``), not loaded globally, so
the rest of the suite keeps its own hypothesis settings.

Every example reports what it saw with ``record(target, error)``: ``None`` when the input was
accepted, else the clean error it got (normalised: numbers and quoted values blanked, so "distinct
errors" counts kinds of refusal, not inputs). ``conftest.py`` writes the tally to
``CTRLSCOPE_FUZZ_STATS`` when set, which is how ``bench/fuzz.py`` prints its table.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import timedelta

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("CTRLSCOPE_FUZZ_PROFILE", "fuzz-ci")
# A hang shows up as an example far over this (every request also has its own socket timeout); a
# normal example takes milliseconds.
DEADLINE = timedelta(seconds=10)

settings.register_profile("fuzz-ci", deadline=DEADLINE, derandomize=False, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("fuzz-long", parent=settings.get_profile("fuzz-ci"),
                          database=settings.default.database,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink])


def budget(ci_examples: int) -> settings:
    """The settings of one property: ``ci_examples`` under ``fuzz-ci``, the bench's count under ``fuzz-long``."""
    examples = int(os.environ.get("CTRLSCOPE_FUZZ_EXAMPLES", "0")) if PROFILE == "fuzz-long" else 0
    return settings(parent=settings.get_profile(PROFILE), max_examples=examples or ci_examples)


# -- bookkeeping -------------------------------------------------------------------------------
EXAMPLES: Counter[str] = Counter()
ERRORS: dict[str, Counter[str]] = {}
_NORMALISE = re.compile(r'"[^"]*"|\'[^\']*\'|\d+')


def record(target: str, error: str | None) -> None:
    """Count one example of ``target`` and, when it was refused, the kind of refusal."""
    EXAMPLES[target] += 1
    if error is not None:
        ERRORS.setdefault(target, Counter())[_NORMALISE.sub("_", error)[:160]] += 1


# -- what a clear error is -----------------------------------------------------------------------
# Pieces of text that only appear when an internal exception leaked into a message verbatim.
LEAKS = ("Traceback", "object has no attribute", "NoneType", "unhashable type", "is not subscriptable",
         "object is not iterable", "KeyError", "IndexError", "AttributeError", "TypeError:", "object at 0x",
         "<built-in", "<function", "<class ", "takes no arguments", "positional argument",
         "not supported between instances", "can only concatenate", "must be str, not",
         "string indices must be", "list indices must be", "Errno")


def assert_clear(message: object, *, context: object = "") -> None:
    """``message`` is a sentence naming the problem: a non-empty string that starts with a word and
    reads like an explanation, not the repr of an internal exception."""
    assert isinstance(message, str), f"error message is not text: {message!r} ({context})"
    text = message.strip()
    assert len(text) >= 8, f"error message too short to explain anything: {message!r} ({context})"
    assert re.match(r"[^\s<{\[]", text), f"error message does not start with a word: {message!r} ({context})"
    leaked = [leak for leak in LEAKS if leak in text]
    assert not leaked, f"error message leaks an internal exception ({leaked}): {message!r} ({context})"

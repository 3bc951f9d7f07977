"""The chaos matrix: under load, SIGKILL the worker, daphne, Redis and the simulator in turn and
restart each, and stall the simulator's network past the watch timeout. After each one:

1. the page showed what happened (reconnecting, redis down, a resync with its reason, an informer
   backing off, the fault), read from what the tab recorded while it happened;
2. no silent gap: per topic, the stream ids the tab applied since each snapshot are exactly the ids
   Redis holds over that stretch, and the tab caught up with the end of every stream;
3. the worker's informer caches (their topics' state in Redis: key → resourceVersion) equal a fresh
   LIST from the simulator: 0 diffs;
4. the reconciler converged: every PodSet has its wanted pods, and says so in its status.

One stack for the module (tests/chaos/conftest.py); the victims run in the order listed, each on the
state the one before left. Shortened timings: 1 s watches, outages of about a second.
"""

from __future__ import annotations

import time

import pytest

from controllers.sim.faults_client import SimFaults
from tests.chaos.conftest import INFORMERS, PODSETS, WORKER, ChaosStack, stream_id_key
from tests.conftest import wait_until

pytestmark = [pytest.mark.browser]

OUTAGE = 1.0  # seconds a killed process stays dead
STALL = 6.0  # seconds the simulator's network stalls: past a 1 s watch and its 1 s margin, twice
# The stall before the simulator: a reflector's backoff (0.8 s doubling to 30 s, reset after 2 quiet
# minutes, as client-go's) climbs through each API outage, and the simulator's restart is the longer.
VICTIMS = ["worker", "daphne", "redis", "stall", "simulator"]
# A reflector back to watching, a relist, may wait out one capped backoff (30 s), and one more if it
# met the CRD not yet re-created.
CACHE_TIMEOUT = 75.0
WORKER_TOPIC = f"w/{WORKER}/"


@pytest.fixture(scope="module")
def stack(browser, django_db, tmp_path_factory):
    s = ChaosStack(tmp_path_factory.mktemp("chaos"), django_db, browser)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def _resync(reasons: set[str], prefix: str = ""):
    return lambda kind, rest: kind == "resync" and rest[0].startswith(prefix) and rest[1] in reasons and \
        f"resync of {rest[0]}: {rest[1]}"


def _state(state: str):
    return lambda kind, rest: kind == "state" and rest[0] == state and f"connection {state}"


def _dom(key_part: str, value: str):
    return lambda kind, rest: kind == "dom" and key_part in rest[0] and rest[1] == value and f"{rest[0]}: {value}"


_BACKING_OFF = _dom("informer ", "backing-off")
_WATCHING = _dom("informer ", "watching")
# Per victim, what the page must show, in this order: the outage, then the way back.
EXPECTED = {
    "worker": [_resync({"worker-reset"}, WORKER_TOPIC), _dom("stream resynced (worker-reset)", "shown")],
    "daphne": [_state("reconnecting"), _dom("reconnected: cache reloaded", "shown"), _state("live")],
    "redis": [_dom("redis", "redis down"), _resync({"redis-reconnected", "epoch-changed", "worker-reset"})],
    "stall": [_dom("fault stall", "shown"), _BACKING_OFF, _WATCHING],
    "simulator": [_BACKING_OFF, _WATCHING],
}


def showed(rows: list[list], victim: str) -> list[str] | None:
    """What in ``rows`` (the tab's notes since the victim was hit) matched ``EXPECTED[victim]`` in
    order, or None while something is missing."""
    found = []
    want = iter(EXPECTED[victim])
    check = next(want)
    for row in rows:
        what = check(row[1], row[2:])
        if what:
            found.append(what)
            check = next(want, None)
            if check is None:
                return found
    return None


def gaps(stack: ChaosStack, segments: dict[str, list[dict]] | None = None) -> tuple[list[str], int]:
    """Stretches where Redis holds a frame the tab did not apply and no snapshot replaced, and how
    many applied frames were checked against Redis."""
    problems = []
    checked = 0
    segments = stack.segments() if segments is None else segments
    for topic, segs in segments.items():
        for n, seg in enumerate(segs):
            if not seg["ids"]:
                continue
            held = stack.stream_ids(topic, seg["start"], seg["ids"][-1])
            if held is None:
                # Another Redis epoch (its data went with the killed server) or trimmed: only ever
                # an earlier segment; the latest one must be checkable.
                if n == len(segs) - 1:
                    problems.append(f"{topic}: the latest segment (from {seg['start']}) is not in Redis")
                continue
            checked += len(seg["ids"])
            if held != seg["ids"]:
                missing = sorted(set(held) - set(seg["ids"]))
                problems.append(f"{topic} from {seg['start']}: {len(missing)} frame(s) never reached the tab, "
                                f"e.g. {missing[:3]}; {len(set(seg['ids']) - set(held))} unknown to Redis")
    return problems, checked


def caught_up(stack: ChaosStack) -> list[str]:
    """Topics whose newest frame in Redis the tab has not applied yet."""
    ends = stack.last_ids()
    cursors = stack.cursors()
    return [f"{t}: tab at {cursors.get(t)}, Redis at {end}" for t, end in ends.items()
            if cursors.get(t) is None or stream_id_key(cursors[t]) < stream_id_key(end)]


@pytest.mark.parametrize("victim", VICTIMS)
def test_chaos(stack: ChaosStack, victim: str, artifacts) -> None:
    page = stack.page
    load = stack.load
    ok_before = load.ok
    wait_until(lambda: load.ok > ok_before + 50, timeout=10, what="the load generator to be writing")
    since = page.evaluate("Date.now()")
    round_ = VICTIMS.index(victim)
    # The desired state moves before the outage and (where the API is up) during it.
    stack.scale(f"ps-{round_ % PODSETS}", 3 + round_ % 2)
    hit = time.monotonic()
    if victim == "stall":
        SimFaults(stack.api).stall(STALL)
        time.sleep(STALL + 0.5)
    else:
        stack.kill(victim)
        if victim != "simulator":
            stack.scale(f"ps-{(round_ + 5) % PODSETS}", 1 + round_ % 3)
        time.sleep(OUTAGE)
        stack.restart(victim)
        if victim == "simulator":
            stack.apply_desired_state()  # it came back empty: the owner of the desired state re-applies it
    restarted = time.monotonic()

    load.pause()
    try:
        try:
            shown = wait_until(lambda: showed(stack.seen(since), victim), timeout=CACHE_TIMEOUT, interval=0.2,
                               what=f"the page to show the {victim} outage and the way back")
        except AssertionError as exc:
            rows = [" ".join(map(str, row[1:]))[:120] for row in stack.seen(since)]
            raise AssertionError(f"{exc}; the page noted:\n" + "\n".join(rows[:80])) from None
        print(f"{victim}: the page showed " + " → ".join(shown))
        try:
            wait_until(lambda: stack.cache_diff() == [], timeout=CACHE_TIMEOUT, interval=0.2,
                       what=f"the informer caches to equal the API after the {victim} outage")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {stack.cache_diff()[:5]}\nthe reflectors' last records:\n"
                                 f"{stack.reflector_story()}") from None
        stack.wait_converged(timeout=40)
        wait_until(lambda: not caught_up(stack), timeout=15, interval=0.2,
                   what=f"the tab to reach every stream's end: {caught_up(stack)[:3]}")
        # After a Redis restart only frames since the resync are checkable: wait for some (the
        # worker's metrics come once a second).
        def checkable() -> tuple[list[str], int] | None:
            problems, checked = gaps(stack)
            return (problems, checked) if problems or checked else None

        problems, checked = wait_until(checkable, timeout=15, interval=0.5,
                                       what="frames the tab applied to check against Redis")
        assert problems == []
        assert page.evaluate("window.ctrlscope.client.state") == "live"
        assert page.inner_text("#conn") == "live" and page.inner_text("#redis") == "redis up"
        assert page.js_errors == []
        done = time.monotonic()
        print(f"{victim}: hit {restarted - hit:.1f} s, recovered and verified {done - restarted:.1f} s later; "
              f"{checked} frames the tab applied match Redis; load {load.rate_achieved():.0f} writes/s "
              f"({load.ok} ok, {load.failed} refused)")
    finally:
        load.resume()
    if victim == VICTIMS[-1]:
        page.screenshot(path=str(artifacts / "chaos-after-matrix.png"), full_page=True)
        segments = stack.segments()
        assert set(INFORMERS.values()) <= set(segments)
        # The gap check is not vacuous: one frame taken out of what the tab applied is reported.
        topic = max(segments, key=lambda t: len(segments[t][-1]["ids"]))  # a latest segment: in Redis
        seg = segments[topic][-1]
        assert len(seg["ids"]) >= 3
        del seg["ids"][len(seg["ids"]) // 2]
        problems, _ = gaps(stack, {topic: [seg]})
        assert len(problems) == 1 and "1 frame(s) never reached the tab" in problems[0], problems

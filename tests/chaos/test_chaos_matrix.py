"""The chaos matrix: under load, SIGKILL the worker, daphne, Redis and the simulator in turn and
restart each, and stall the simulator's network past the watch timeout. After each one:

1. the page showed what happened (reconnecting, redis down, a resync with its reason, an informer
   backing off, the fault), read from what the tab recorded while it happened;
2. no silent gap: per topic, the stream ids the tab applied since each snapshot are exactly the ids
   Redis holds over that stretch, and the tab caught up with the end of every stream;
3. the worker's informer caches (their topics' state in Redis: key → resourceVersion) equal a fresh
   LIST from the simulator: 0 diffs;
4. the reconciler converged: every PodSet has its wanted pods, and says so in its status.

One stack for the module (tests/chaos/conftest.py, which holds the checks too: the same ones run on the
real control plane in test_chaos_real.py); the victims run in the order listed, each on the state the
one before left. Shortened timings: 1 s watches, outages of about a second.
"""

from __future__ import annotations

import time

import pytest

from controllers.sim.faults_client import SimFaults
from tests.chaos.conftest import (
    BACKING_OFF,
    PODSETS,
    SHARED_EXPECTED,
    WATCHING,
    SimChaosStack,
    gap_check_is_not_vacuous,
    verify_recovery,
)
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
# Per victim, what the page must show, in this order: the outage, then the way back.
EXPECTED = {**SHARED_EXPECTED, "simulator": [BACKING_OFF, WATCHING]}


@pytest.fixture(scope="module")
def stack(browser, django_db, tmp_path_factory):
    s = SimChaosStack(tmp_path_factory.mktemp("chaos"), django_db, browser)
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.mark.parametrize("victim", VICTIMS)
def test_chaos(stack: SimChaosStack, victim: str, artifacts) -> None:
    page = stack.page
    load = stack.load
    assert load is not None and stack.api is not None
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

    recovery = verify_recovery(stack, victim, EXPECTED[victim], since, cache_timeout=CACHE_TIMEOUT)
    print(f"{victim}: the page showed " + " → ".join(recovery.shown))
    done = time.monotonic()
    print(f"{victim}: hit {restarted - hit:.1f} s, {recovery.summary(restarted)}, verified {done - restarted:.1f} s "
          f"later; {recovery.checked} frames the tab applied match Redis; load {load.rate_achieved():.0f} writes/s "
          f"({load.ok} ok, {load.failed} refused)")
    if victim == VICTIMS[-1]:
        page.screenshot(path=str(artifacts / "chaos-after-matrix.png"), full_page=True)
        gap_check_is_not_vacuous(stack)

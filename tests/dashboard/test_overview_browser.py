"""The overview (/) in real headless Chromium against daphne + Redis.

Workers are driven deterministically: the test calls the runtime's observer hooks on a real
TelemetryObserver and MetricsObserver (fanned out as the Manager does) and ticks a real MetricsSampler
on a fake clock, so stage rates are exact; then it asserts what the page shows.
"""

from __future__ import annotations

import re
import time

import pytest

from controllers.clock import FakeClock
from controllers.metrics import FAMILIES, MetricsObserver
from controllers.observer import FanoutObserver
from controllers.telemetry.metrics_sampler import MetricsSampler
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_cache_panel_browser import key, pod, save_screenshot
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser

SERVER = "https://prod.example:6443"


class Worker:
    """One worker's telemetry as runcontrollers wires it: TelemetryObserver + MetricsObserver + sampler."""

    def __init__(self, publisher_factory, name: str, *, ago: float = 0.0) -> None:
        # The fake clock's wall time is now (or `ago` seconds ago): the page compares it with its own.
        self.clock = FakeClock(start=1000.0, wall_offset=time.time() - ago - 1000.0)
        self.pub = publisher_factory(clock=self.clock)
        self.telemetry = TelemetryObserver(self.pub, worker=name, clock=self.clock)
        self.metrics = MetricsObserver(clock=self.clock)
        self.obs = FanoutObserver(self.telemetry, self.metrics)
        self.sampler = MetricsSampler(self.metrics.registry, self.pub, topic=self.telemetry.metrics_topic,
                                      families=FAMILIES, stages=self.telemetry.stages, clock=self.clock)

    def informer(self, name: str, *, items: int, cached: int, synced: bool) -> None:
        obs = self.obs
        obs.on_informer(name, fifo="DeltaFIFO", resync_period=0.0)
        obs.on_reflector_state(name, state="listing")
        obs.on_list(name, resource_version="100", items=items, duration=0.05)
        for i in range(cached):
            obs.on_store(name, op="upsert", key=key(i), obj=pod(i))
        if synced:
            obs.on_watch_start(name, resource_version="100")
            obs.on_reflector_state(name, state="watching")
            obs.on_reflector_state(name, state="synced")

    def controller(self, name: str, watches: list[str], *, started: bool) -> None:
        self.metrics.register_controller(name, 2)
        self.obs.on_controller(name, watches=watches, workers=2, started=started)

    def publish_one_synced_controller(self) -> None:
        """A synced ``pods`` informer and a running ``podset`` controller, with one metrics sample."""
        self.informer("pods", items=1, cached=1, synced=True)
        self.controller("podset", ["pods"], started=True)
        self.sampler.tick()
        self.pub.flush()

    def traffic(self, informer: str, controller: str, n: int) -> None:
        """n watch events through every stage; every other one reconciled, a quarter of those failing."""
        obs = self.obs
        for i in range(n):
            k = key(i)
            obs.on_watch_event(informer, event_type="MODIFIED", key=k, resource_version=str(2000 + i))
            obs.on_fifo(informer, op="queued", key=k, delta="Updated", depth=1)
            obs.on_store(informer, op="upsert", key=k, obj=pod(i, rv=2000 + i))
            obs.on_handler(informer, handler=f"controller/{controller}", event="update", key=k, outcome="ok",
                           duration=0.0002)
            obs.on_queue(controller, op="add", key=k, depth=1)
            if i % 2 == 0:
                obs.on_queue(controller, op="get", key=k, depth=0, duration=0.001)
                obs.on_reconcile_start(controller, key=k, worker=0)
                # The failing reconciles failed on a stale write: a 409 Conflict.
                obs.on_request(method="PUT", path=f"/api/v1/namespaces/default/pods/pod-{i:06d}",
                               code=409 if i % 8 == 0 else 200, duration=0.003)
                obs.on_reconcile_end(controller, key=k, worker=0, duration=0.004,
                                     result="error" if i % 8 == 0 else "success", error="boom" if i % 8 == 0 else None)
                obs.on_queue(controller, op="done", key=k, depth=0, duration=0.004)

    def tick(self, seconds: float = 1.0) -> None:
        self.clock.step(seconds)
        self.sampler.tick()
        self.pub.flush()


def open_overview(browser, dashboard):
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + "/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    return page


def stage(page, worker: str, controller: str, name: str, *, informer: str | None = None) -> str:
    card = f'#overview .worker[data-worker="{worker}"] .ctl-card[data-controller="{controller}"]'
    where = f'.informer-chain[data-informer="{informer}"] ' if informer else ""
    return page.inner_text(f'{card} {where}.stage[data-stage="{name}"]')


def test_overview_groups_workers_by_cluster_and_draws_each_controller_as_its_pipeline(browser, dashboard,
                                                                                     publisher_factory, artifacts):
    leader, follower, loose = (Worker(publisher_factory, n) for n in ("w1", "w2", "w3"))
    # v1.2: the leader only observes (read-only, the default for a real cluster); the follower acts.
    leader.telemetry.describe_cluster(name="prod", server=SERVER, version="v1.31.2", simulated=False, writes="read-only")
    follower.telemetry.describe_cluster(name="prod", server=SERVER, version="v1.31.2", simulated=False, writes="allowed")
    leader.obs.on_leader("ctrlscope-lock", identity="w1-1", leader=True, holder="w1-1")
    follower.obs.on_leader("ctrlscope-lock", identity="w2-1", leader=False, holder="w1-1")
    leader.informer("pods", items=3, cached=3, synced=True)
    leader.informer("configmaps", items=1, cached=1, synced=True)
    leader.informer("secrets", items=0, cached=0, synced=True)  # watched by no controller shown here
    leader.controller("podset", ["pods", "configmaps"], started=True)
    follower.informer("pods", items=1000, cached=400, synced=False)
    follower.controller("podset", ["pods"], started=False)
    loose.obs.on_event("other ctl", event="create", key="default/x", requests=["default/x"])  # no components
    for w in (leader, follower, loose):
        w.sampler.tick()
        w.pub.flush()

    page = open_overview(browser, dashboard)
    prod = '#overview .cluster[data-cluster="prod"]'
    page.wait_for_selector(f'{prod} .worker[data-worker="w2"] .ctl-card[data-controller="podset"]', timeout=10_000)
    assert "prod" in page.inner_text(f"{prod} .cluster-head") and SERVER in page.inner_text(f"{prod} .cluster-head")
    assert "Kubernetes v1.31.2" in page.inner_text(f"{prod} .cluster-head")
    assert page.eval_on_selector_all(f"{prod} .worker", "els => els.map(e => e.dataset.worker)") == ["w1", "w2"]
    badges = page.eval_on_selector_all(f"{prod} .worker .badge.writes", "els => els.map(e => [e.textContent, e.title])")
    assert [b[0] for b in badges] == ["read-only", "acting"], badges
    assert "refused before it is sent" in badges[0][1] and "--allow-writes" in badges[1][1]
    assert page.is_hidden('.worker[data-worker="w3"] .badge.writes'), "a worker that does not say shows no badge"
    page.wait_for_selector('#overview .cluster[data-cluster=""] .worker[data-worker="w3"] a[href="/c/w3/other_ctl/"]')

    # The leader runs its controller; the follower's waits (standby) and says who leads.
    head = page.inner_text('.worker[data-worker="w1"] .ctl-card[data-controller="podset"] .ctl-card-head')
    assert "running" in head and "leader" in head
    head = page.inner_text('.worker[data-worker="w2"] .ctl-card[data-controller="podset"] .ctl-card-head')
    assert "standby" in head and "follower (leader: w1-1)" in head
    # The pipeline shows only the informers the controller watches, with their badges.
    informers = page.eval_on_selector_all('.worker[data-worker="w1"] .ctl-card[data-controller="podset"] .informer-chain',
                                          "els => els.map(e => e.dataset.informer)")
    assert informers == ["configmaps", "pods"]
    # An informer no controller watches is a card of its own: its chain, ending at its handlers.
    plain = '.worker[data-worker="w1"] .informer-card[data-informer="secrets"]'
    assert page.eval_on_selector(f"{plain} a.informer-link", "a => [a.textContent, a.getAttribute('href')]") == [
        "secrets", "/c/w1/informer/secrets/"]
    assert page.eval_on_selector_all(f"{plain} .stage", "els => els.map(e => e.dataset.stage)") == [
        "reflector", "fifo", "cache", "handlers"]
    reflector = stage(page, "w1", "podset", "reflector", informer="pods")
    assert "watching" in reflector and "synced" in reflector
    assert "3 objects" in stage(page, "w1", "podset", "cache", informer="pods")
    # Initial sync as progress: 400 of the 1,000 listed objects are in the follower's cache. The cache's
    # size comes with the worker's stage samples, which may land after the card is drawn from its
    # components ("0 / 1,000" until then; seen once under pytest-xdist): wait for it.
    card = '#overview .worker[data-worker="w2"] .ctl-card[data-controller="podset"] .informer-chain[data-informer="pods"]'
    page.wait_for_function("(sel) => document.querySelector(sel)?.innerText.includes('initial sync 400 / 1,000')",
                           arg=f'{card} .stage[data-stage="reflector"]', timeout=10_000)
    sync = stage(page, "w2", "podset", "reflector", informer="pods")
    assert "initial sync 400 / 1,000" in sync and "listing" in sync
    assert page.evaluate("""document.querySelector('.worker[data-worker="w2"] progress').value""") == 400

    # Live rates per stage, from the differences between two samples one second apart.
    assert stage(page, "w1", "podset", "reconcile").endswith("–"), "one sample: no rate yet"
    leader.traffic("pods", "podset", 40)
    leader.tick()
    page.wait_for_function("""() => !document.querySelector('.worker[data-worker="w1"] .ctl-card .stage[data-stage="reconcile"] .rate')
        .textContent.startsWith('–')""", timeout=5_000)
    rates = {name: page.inner_text(f'.worker[data-worker="w1"] .ctl-card .informer-chain[data-informer="pods"] '
                                   f'.stage[data-stage="{name}"] .rate') for name in ("reflector", "fifo", "cache", "handlers")}
    assert rates == {"reflector": "40/s", "fifo": "40/s", "cache": "40/s", "handlers": "40/s"}, rates
    ctl = {name: page.inner_text(f'.worker[data-worker="w1"] .controller-chain .stage[data-stage="{name}"] .rate')
           for name in ("workqueue", "workers", "reconcile", "writes")}
    assert ctl == {"workqueue": "40/s", "workers": "20/s", "reconcile": "20/s", "writes": "20/s"}, ctl
    assert "5.0/s failing" in stage(page, "w1", "podset", "reconcile")
    assert "20 writes" in stage(page, "w1", "podset", "writes")
    writes_err = page.locator('.worker[data-worker="w1"] .controller-chain .stage[data-stage="writes"] .stage-err')
    assert re.fullmatch(r"([\d,]+) failed \(\1 × 409 conflict\)", writes_err.inner_text()), writes_err.inner_text()
    assert "optimistic concurrency" in writes_err.get_attribute("title")
    save_screenshot(page, artifacts, "overview.png", full_page=True)

    # The developer view is collapsed: the page subscribed to components and metrics topics only.
    assert page.evaluate("document.getElementById('dev').open") is False
    subscribed = page.evaluate("[...window.ctrlscope.client.topics.keys()]")
    assert subscribed and all(t.endswith(("/components", "/metrics")) for t in subscribed), subscribed
    page.click("#dev > summary")
    page.wait_for_function("() => window.ctrlscope.client.topics.has('w/w1/informer/pods')")
    page.wait_for_selector("#topics li >> text=w/w1/queue/podset")
    page.click("#dev > summary")
    page.wait_for_function("() => !window.ctrlscope.client.topics.has('w/w1/informer/pods')")

    # Redrawn every second, but updated in place: a link never changes under the pointer mid-click.
    link = page.query_selector('.worker[data-worker="w1"] a[href="/c/w1/podset/"]')
    leader.tick()
    page.wait_for_timeout(1300)
    assert link.evaluate("a => a.isConnected"), "the card's link was rebuilt by a redraw"
    page.click('.worker[data-worker="w1"] a[href="/c/w1/podset/"]')
    page.wait_for_url("**/c/w1/podset/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    assert page.inner_text("#h-controller") == "podset"
    notice = page.wait_for_selector("#writes-notice:not([hidden])", timeout=10_000).inner_text()
    assert notice.startswith("read-only: worker w1 only observes") and "--allow-writes" in notice, notice
    save_screenshot(page, artifacts, "controller-read-only.png")
    close_page(page)


def test_a_worker_that_stopped_publishing_is_marked_stale_with_when_it_was_last_seen(browser, dashboard,
                                                                                     publisher_factory):
    gone, alive = Worker(publisher_factory, "gone", ago=125.0), Worker(publisher_factory, "alive")
    for w in (gone, alive):
        w.publish_one_synced_controller()
    page = open_overview(browser, dashboard)
    page.wait_for_selector('.worker[data-worker="gone"][data-stale="true"]', timeout=10_000)
    head = page.inner_text('.worker[data-worker="gone"] .worker-head')
    assert "stale" in head and re.search(r"last seen 2m [5-9]s ago", head), head
    assert page.inner_text('.worker[data-worker="gone"] .stage[data-stage="reconcile"] .rate') == "–", \
        "a stale worker's rates are unknown, not zero"
    # The live one keeps publishing (a sample a second is its heartbeat) and stays live.
    for _ in range(3):
        alive.tick()
        time.sleep(0.5)
    assert page.get_attribute('.worker[data-worker="alive"]', "data-stale") == "false"
    assert "live" in page.inner_text('.worker[data-worker="alive"] .worker-head')
    close_page(page)


@pytest.mark.browser
def test_workers_stopped_for_over_ten_minutes_are_folded_below_the_live_ones(browser, dashboard, publisher_factory):
    old, recent, alive = (Worker(publisher_factory, "old", ago=3600.0), Worker(publisher_factory, "recent", ago=125.0),
                          Worker(publisher_factory, "alive"))
    for w in (old, recent, alive):
        w.publish_one_synced_controller()
    page = open_overview(browser, dashboard)
    page.wait_for_selector(".gone-workers summary", timeout=10_000)
    # Each worker's components arrive in their own snapshot: wait for all three before comparing.
    for w in ("old", "recent", "alive"):
        page.wait_for_selector(f'.worker[data-worker="{w}"]', state="attached", timeout=10_000)
    assert page.inner_text(".gone-workers summary") == "1 stopped worker (stopped over 1 min ago, or nothing published for over 10 min)"
    folded = page.eval_on_selector_all(".gone-workers .worker", "ws => ws.map(w => w.dataset.worker)")
    shown = page.eval_on_selector_all(".cluster > .worker", "ws => ws.map(w => w.dataset.worker)")
    assert folded == ["old"] and shown == ["alive", "recent"], (folded, shown)
    assert not page.is_visible('.worker[data-worker="old"]'), "folded: closed until asked for"
    page.click(".gone-workers summary")
    assert page.is_visible('.worker[data-worker="old"]')
    page.wait_for_timeout(1300)  # redrawn every second: it stays open
    assert page.evaluate("document.querySelector('.gone-workers').open")
    close_page(page)

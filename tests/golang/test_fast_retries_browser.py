"""Retries at the speed real controllers retry, read off the controller page in Chromium.

controller-runtime's rate limiter retries a failing key after 5, 10, 20 ms: three errors and a
success land within ~40 ms, less than a pixel apart at any timeline window, and every wait is over
before a frame draws it. This test runs the fidelity Reconciler (a ConfigMap annotated
``ctrlscope.dev/fail-first: "3"`` fails three times, then succeeds; no work per Reconcile) in real
controller-runtime (``go/cmd/fidelity``: its priority queue and that queue's default limiter) and in
ctrlscope's Python runtime (its default controller rate limiter), each against the simulator, and
reads the page as a user would, without hovering:

- the timeline draws the four attempts as one mark labelled "3 errors → success in N ms", coloured
  as an error with a success cap, at the 10 s, 1 m and 15 m windows; the lane says "4× · 3 failed →
  success"; keys that share a long prefix keep distinguishable labels;
- the workqueue panel shows the key as "waited 20 ms, retry 3" after its last wait, and the next
  backoff the limiter will choose;
- clicking the mark lists the attempts in order with the waits 5, 10 and 20 ms before the retries,
  each chosen by the exponential part of the limiter, on a strip where every attempt is visible.

Screenshots (light and dark) go to artifacts/ as fast-retries-{runtime}-*.png.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.informers.listwatch import ApiError
from controllers.process import stop_process
from tests.conftest import ROOT, wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.golang.telemetry import Published

pytestmark = pytest.mark.browser

NAMESPACE = "retries"
FLAKY = "heldout-replica-fail"  # fails 3 times, then succeeds
STEADY = "heldout-replica-ok"  # succeeds at once: its key shares a long prefix with FLAKY's
WINDOWS = {"10": "10s", "60": "1m", "900": "15m"}
RED, GREEN = "rgb(196, 61, 61)", "rgb(31, 138, 76)"  # --r-error / --r-success (light theme)


def configmap(name: str, fail_first: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "annotations": {"ctrlscope.dev/fail-first": str(fail_first)}}}


@pytest.fixture(params=["go", "python"])
def controller(request, sim_kubeconfig, redis_url, prefix, tmp_path):
    """The fidelity controller of one runtime, started against the simulator: (runtime, worker)."""
    runtime = request.param
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    try:
        client.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as exc:
        if exc.code != 409:
            raise
    worker = f"{runtime}-retries"
    if runtime == "go":
        request.getfixturevalue("go_process")(
            "fidelity", "--kubeconfig", str(sim_kubeconfig), "--worker-name", worker, "--namespace", NAMESPACE,
            "--work", "0s")
        proc = None
    else:
        env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
               "CTRLSCOPE_FIDELITY_NAMESPACE": NAMESPACE, "CTRLSCOPE_FIDELITY_WORK": "0"}
        with open(tmp_path / "py-retries.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "manage.py", "runcontrollers", "--controller",
                                     "controllers.examples.fidelity:setup", "--kubeconfig", str(sim_kubeconfig),
                                     "--worker-name", worker, "--status-every", "0"],
                                    cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    published = Published(redis_url, prefix)
    try:
        wait_until(lambda: (published.state(f"w/{worker}/components").get("controller/fidelity") or {}).get("started"),
                   timeout=60, what=f"{worker}'s controller to start")
        yield runtime, worker, client
    finally:
        published.close()
        if proc is not None:
            stop_process(proc)


def lane(key: str) -> str:
    return f'#lanes .lane[data-key="{key}"]'


def read_mark(page, key: str) -> dict:
    """What the key's lane shows, as a user reads it: its label, its marks' labels and colours."""
    return page.eval_on_selector(lane(key), """l => {
        const track = l.querySelector('.lane-track').getBoundingClientRect();
        const marks = [...l.querySelectorAll('.attempt.mark')].map(m => {
            const label = m.querySelector('.mark-label'), box = label.getBoundingClientRect();
            return {label: label.hidden ? '' : label.textContent, bg: getComputedStyle(m).backgroundColor,
                    end: getComputedStyle(m.querySelector('.mark-end')).backgroundColor,
                    inside: box.left >= track.left - 0.5 && box.right <= track.right + 0.5 && box.width > 0,
                    fits: label.scrollWidth <= label.clientWidth};
        });
        return {key: l.querySelector('.lane-key').textContent, title: l.querySelector('.lane-key').title,
                meta: l.querySelector('.lane-meta').textContent, marks: marks,
                single: l.querySelectorAll('.attempt:not(.mark)').length};
    }""")


def test_fast_retries_read_at_every_window_with_their_waits_and_delays(browser, dashboard_factory, controller, artifacts):
    runtime, worker, client = controller
    dashboard = dashboard_factory()
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(f"{dashboard.url}/c/{worker}/fidelity/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)

    flaky, steady = f"{NAMESPACE}/{FLAKY}", f"{NAMESPACE}/{STEADY}"
    client.send_json("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", configmap(STEADY, 0))
    client.send_json("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", configmap(FLAKY, 3))

    # The workqueue panel: the key waited (20 ms before its 3rd retry), seen although no frame could
    # draw the wait itself.
    waited = f'#q-waiting tr.waited[data-key="{flaky}"]'
    page.wait_for_selector(waited, timeout=30_000)
    waited_text = page.locator(waited).inner_text()  # a locator: the panel redraws its rows, a handle may go stale
    assert "waited 20 ms, retry 3" in waited_text, waited_text
    recent = page.inner_text("#q-waiting .recent")
    assert "just waited" in recent, recent
    # Its requeue count since the last forget, and the delay the limiter will choose if it fails
    # again: after the success, forgotten (0), so the first delay again (from the worker's
    # rate_limiter, protocol v1.5).
    row = f'#q-waiting tr.waited[data-key="{flaky}"]'
    page.wait_for_function(f"""() => document.querySelector('{row} td.requeues')?.textContent === '0'""", timeout=5_000)
    assert page.inner_text(f"{row} td.next") == "5 ms"
    save_screenshot(page, artifacts, f"fast-retries-{runtime}-queue.png", clip=page.locator("#queue-panel").bounding_box())

    page.wait_for_function(f"""() => document.querySelector('{lane(flaky)} .lane-meta')?.textContent === '4× · 3 failed → success'""",
                           timeout=30_000)
    for seconds, label in WINDOWS.items():
        page.click(f'#window button[data-window="{seconds}"]')
        page.wait_for_function(f"() => document.getElementById('tl-axis').dataset.window === '{seconds}'")
        page.wait_for_timeout(150)  # a frame of the moving axis at this window
        seen = read_mark(page, flaky)
        assert seen["meta"] == "4× · 3 failed → success", (label, seen)
        assert seen["single"] == 0 and len(seen["marks"]) == 1, (label, seen)
        mark = seen["marks"][0]
        assert re.fullmatch(r"3 errors → success in [\d.]+ m?s", mark["label"]), (label, mark)
        assert mark["inside"] and mark["fits"], (label, mark)  # whole, and within the track
        assert (mark["bg"], mark["end"]) == (RED, GREEN), (label, mark)  # worst result, last result
        page.locator("#timeline-panel").screenshot(path=str(artifacts / f"fast-retries-{runtime}-timeline-{label}.png"))
    # Keys that share a long prefix keep labels that tell them apart, and the full key on hover.
    ok = read_mark(page, steady)
    assert ok["meta"] == "1× · success" and ok["single"] == 1, ok
    shown = read_mark(page, flaky)
    assert shown["key"] != ok["key"] and "…" in shown["key"] and shown["key"].endswith("fail"), (shown, ok)
    assert (shown["title"].split(" ")[0], ok["title"].split(" ")[0]) == (flaky, steady)

    # Click the mark: its attempts in order, each visible on a zoomed strip, with the waits before
    # the retries and the part of the rate limiter that chose them.
    page.click(f"{lane(flaky)} .attempt.mark")
    page.wait_for_selector("#details:not([hidden]) .mark-table")
    rows = page.eval_on_selector_all("#details tr.mark-attempt", """trs => trs.map(tr => ({
        result: tr.dataset.result, waited: tr.querySelector('.waited').textContent,
        chosen: tr.querySelector('.chosen').textContent, error: tr.querySelector('.error').textContent}))""")
    assert [r["result"] for r in rows] == ["error", "error", "error", "success"], rows
    # (each may say it ran later than its wait: " · ran after 61 ms" on a busy machine)
    assert [r["waited"].split(" · ")[0] for r in rows[1:]] == ["5 ms, retry 1", "10 ms, retry 2", "20 ms, retry 3"], rows
    assert [r["chosen"] for r in rows[1:]] == ["exponential 5 ms × 2⁰ (retry 1)", "exponential 5 ms × 2¹ (retry 2)",
                                               "exponential 5 ms × 2² (retry 3)"], rows
    assert all(f"injected failure {i + 1} of 3" in r["error"] for i, r in enumerate(rows[:3])) and not rows[3]["error"], rows
    bars = page.eval_on_selector_all("#details .zoom-bar", "els => els.map(e => e.getBoundingClientRect()).map(b => [b.left, b.right])")
    assert len(bars) == 4 and all(right - left >= 3 for left, right in bars), bars
    assert all(bars[i][1] < bars[i + 1][0] for i in range(3)), f"attempts overlap on the zoomed strip: {bars}"
    gaps = page.eval_on_selector_all("#details .zoom-gap span", "els => els.map(e => e.textContent)")
    assert gaps == ["5 ms", "10 ms", "20 ms"], gaps
    page.locator("#timeline-panel").screenshot(path=str(artifacts / f"fast-retries-{runtime}-details.png"))
    # An attempt of the list opens its own details, with the way back.
    page.click("#details tr.mark-attempt:nth-child(3)")
    text = page.inner_text("#details")
    assert "attempt 3 of " + flaky in text and "injected failure 3 of 3" in text and "10 ms, retry 2" in text, text
    page.click("#details-back")
    page.wait_for_selector("#details .mark-table")

    page.emulate_media(color_scheme="dark")
    page.locator("#timeline-panel").screenshot(path=str(artifacts / f"fast-retries-{runtime}-details-dark.png"))
    save_screenshot(page, artifacts, f"fast-retries-{runtime}-page-dark.png", full_page=False)
    page.emulate_media(color_scheme="light")
    close_page(page)

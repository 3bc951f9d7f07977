"""The object inspector against the real stack: the simulator over HTTP, a worker running the example
controllers (plus a Secret informer), Redis, daphne and headless Chromium.

A ConfigMap and a Secret are created through the API and the ConfigMap is updated; clicking the
ConfigMap's cache row shows its YAML with the new data and a diff with the old and new value; the
Secret's data (and the manifest kubectl apply leaves in an annotation) is shown redacted. Stopping
the worker turns the next click into a clear error instead of a wait.

The two pure modules behind it run in the same Chromium: yaml.js's output is read back by PyYAML
(a YAML 1.1 parser: yes/no/on/off and friends must come out quoted), and linediff.js is checked for
correct and minimal diffs against a Python LCS.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys

import orjson
import pytest
import requests
from kubernetes import client as k8s

from controllers.process import stop_process
from controllers.sim import SimCluster
from controllers.telemetry.redaction import LAST_APPLIED
from tests.conftest import ROOT, wait_until
from tests.dashboard.static_page import static_page
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.sim.conftest import FAST, api_client_for

pytestmark = pytest.mark.browser

PASSWORD = "hunter2-correct-horse"
ENCODED = base64.b64encode(PASSWORD.encode()).decode()


@pytest.fixture
def stack(tmp_path, redis_url, prefix, dashboard):
    """Simulator + worker (worker name ``e2e``) + the dashboard, on one private key prefix."""
    sim = SimCluster(port=0, **FAST).start()
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup",
             "--controller", "tests.dashboard.inspect_setup:watch_secrets", "--kubeconfig", str(kubeconfig),
             "--worker-name", "e2e", "--status-every", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    api = api_client_for(sim, tmp_path)
    try:
        yield sim, k8s.CoreV1Api(api), worker, log_path
    finally:
        api.close()
        stop_process(worker)
        sim.stop()


def panel(page) -> dict:
    """Screenshot options for the cache panel alone (it may reach below the viewport)."""
    clip = page.evaluate("""() => { const r = document.getElementById('cache-panel').getBoundingClientRect();
        return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; }""")
    return {"full_page": True, "clip": clip}


def inspect(dashboard, informer: str, key: str) -> tuple[int, dict]:
    resp = requests.get(f"{dashboard.url}/c/e2e/informer/{informer}/object", params={"key": key}, timeout=10)
    return resp.status_code, resp.json()


def test_the_inspector_shows_yaml_a_diff_of_the_last_update_and_redacted_secrets(stack, dashboard, browser,
                                                                                  artifacts):
    _sim, core, worker, log_path = stack
    core.create_namespaced_config_map("default", {"metadata": {"name": "greeting"},
                                                  "data": {"message": "hello", "lang": "en"}})
    applied = orjson.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-password"},
                            "data": {"password": ENCODED}}).decode()
    core.create_namespaced_secret("default", {
        "metadata": {"name": "db-password", "annotations": {LAST_APPLIED: applied}},
        "type": "Opaque", "data": {"password": ENCODED}})
    wait_until(lambda: inspect(dashboard, "v1_ConfigMap", "default/greeting")[0] == 200, timeout=30,
               what=f"the worker to cache the ConfigMap (log: {log_path})")
    updated = core.patch_namespaced_config_map("greeting", "default", {"data": {"message": "hello, world"}})
    new_rv = updated.metadata.resource_version
    # The update handler has run once the worker answers with the pair (the page then shows it at once).
    status, answer = wait_until(
        lambda: (r := inspect(dashboard, "v1_ConfigMap", "default/greeting"))[1].get("update") and r,
        what="the update handler's pair")
    assert answer["update"]["new_rv"] == new_rv and answer["previous"]["data"]["message"] == "hello"

    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + "/c/e2e/deployment-summary/?cache=v1_ConfigMap")
    row = '#cache-spacer .cache-row[data-key="default/greeting"]'
    page.wait_for_selector(row + f" >> text={new_rv}", timeout=20_000)
    page.click(row)
    yaml_box = page.wait_for_selector("#cache-object .obj-yaml", timeout=5_000)
    text = yaml_box.inner_text()
    assert "kind: ConfigMap" in text and "  message: hello, world\n" in text and "  lang: en\n" in text
    assert f'resourceVersion: "{new_rv}"' in text
    assert page.inner_text("#cache-object .obj-rv") == new_rv
    page.locator("#cache-panel").scroll_into_view_if_needed()
    save_screenshot(page, artifacts, "inspect-yaml.png", **panel(page))

    page.click('#cache-object button.tab[data-tab="diff"]')
    page.wait_for_selector("#cache-object .obj-diff")
    removed = page.eval_on_selector_all("#cache-object .dl.del .txt", "els => els.map(e => e.textContent)")
    added = page.eval_on_selector_all("#cache-object .dl.add .txt", "els => els.map(e => e.textContent)")
    assert "  message: hello" in removed and "  message: hello, world" in added
    assert any("resourceVersion" in line for line in removed)
    assert "  lang: en" not in removed + added, "unchanged lines are context, not changes"
    head = page.inner_text("#cache-object .diff-head")
    assert f"→ {new_rv}" in head and "deployment-summary" in head
    drawn = page.eval_on_selector_all("#cache-object .dl", "els => els.length")
    page.click("#cache-object .dl.fold")  # unchanged lines are folded; a click unfolds them
    assert page.eval_on_selector_all("#cache-object .dl", "els => els.length") > drawn
    save_screenshot(page, artifacts, "inspect-diff.png", **panel(page))
    page.emulate_media(color_scheme="dark")
    save_screenshot(page, artifacts, "inspect-diff-dark.png", **panel(page))
    page.emulate_media(color_scheme="light")

    # The deep link opens the inspector too (on the tab last used on that page: YAML on a fresh one).
    linked = browser.new_page()
    linked.goto(dashboard.url + "/c/e2e/deployment-summary/?cache=v1_ConfigMap&obj=default/greeting")
    assert "message: hello, world" in linked.wait_for_selector("#cache-object .obj-yaml", timeout=20_000).inner_text()
    linked.close()

    # The cache moves on while the pane is open: the page says so; reload shows the new state. Then the
    # ConfigMap is deleted: the last state an update handler saw is still shown, marked deleted.
    later = core.patch_namespaced_config_map("greeting", "default", {"data": {"message": "bye"}})
    later_rv = later.metadata.resource_version
    page.wait_for_selector(f"#cache-object .badge.warn >> text=the cache has rv {later_rv} now", timeout=10_000)
    wait_until(lambda: inspect(dashboard, "v1_ConfigMap", "default/greeting")[1]["update"]["new_rv"] == later_rv,
               what="the second update's handler call")
    core.delete_namespaced_config_map("greeting", "default")
    page.wait_for_selector("#cache-details .details-head >> text=not in the cache (deleted)", timeout=10_000)
    assert "deleted from the cache since" in page.inner_text("#cache-object .obj-meta")
    page.click("#cache-object .obj-reload")
    page.wait_for_selector(f"#cache-object .obj-meta >> text=last seen at rv {later_rv}", timeout=5_000)
    added = page.eval_on_selector_all("#cache-object .dl.add .txt", "els => els.map(e => e.textContent)")
    assert "  message: bye" in added, "the diff of the last update still shows after the delete"
    page.click('#cache-object button.tab[data-tab="yaml"]')
    assert "  message: bye" in page.inner_text("#cache-object .obj-yaml")
    assert "its last state as handler" in page.inner_text("#cache-object .obj-note")
    page.keyboard.press("Escape")
    page.wait_for_selector("#cache-details", state="hidden")
    assert "obj=" not in page.url

    # The Secret: its value and the last-applied manifest are redacted (and marked) in the worker.
    topic = page.eval_on_selector("#cache-informer",
                                  "s => [...s.options].map(o => o.value).find(v => v.endsWith('/v1_Secret'))")
    page.select_option("#cache-informer", topic)
    page.click('#cache-spacer .cache-row[data-key="default/db-password"]', timeout=10_000)
    text = page.wait_for_selector("#cache-object .obj-yaml").inner_text()
    assert "kind: Secret" in text and "password: \"<redacted> (28 chars, #" in text
    redacted = page.eval_on_selector_all("#cache-object .obj-yaml .redacted", "els => els.map(e => e.textContent)")
    assert len(redacted) == 2 and any(LAST_APPLIED in line for line in redacted)
    assert "Redacted" in page.inner_text("#cache-object .redacted-note")
    assert ENCODED not in page.content() and PASSWORD not in page.content()
    page.click('#cache-object button.tab[data-tab="diff"]')
    assert "only the current version is known" in page.inner_text("#cache-object .diff-none")
    page.click('#cache-object button.tab[data-tab="yaml"]')
    save_screenshot(page, artifacts, "inspect-secret.png", **panel(page))

    # The worker stops (its inspector withdraws the heartbeat): the next click says so at once.
    worker.send_signal(signal.SIGTERM)
    worker.wait(15)
    page.click("#cache-object .obj-reload")
    error = page.wait_for_selector("#cache-object .obj-error", timeout=5_000).inner_text()
    assert "HTTP 503" in error and "worker e2e is not running" in error
    save_screenshot(page, artifacts, "inspect-worker-stopped.png", **panel(page))
    close_page(page)


STRINGS = [
    "", " lead", "trail ", "yes", "No", "on", "OFF", "y", "n", "~", "null", "Null", "true", "False", "<<", "=",
    "1", "1.5", "-1", "+1", ".5", "1e3", "0x1F", "0o17", "0777", "12:30", "1_000", ".inf", "-.Inf", ".NaN",
    "2024-01-01", "2024-01-01T00:00:00Z", "1.27.3", "a: b", "a:b", "http://x:80/p?q=1", "a #b", "a#b", "#c",
    "- x", "-", "?", ":", "key:", "[x]", "{x}", "x, y", "*ref", "&anc", "!tag", "|", ">", "'q'", '"dq"', "%p",
    "@at", "`bt", "tab\there", "back\\slash", 'quote " inside', "héllo wörld", "emoji 🙂", "x" * 300,
    "nl\n", "multi\nline", "multi\nline\n", "multi\nline\n\n\n", "\nleading newline", " leading space\nx",
    "a\n  indented\nb", "trailing spaces  \nx", "last line spaces\n  ", "a\n\tb", "a\n\nb", "cr\r\nlf",
    "ctrl\u0001", "nel\u0085x", "ls\u2028x", "bom\ufeffx", "- |\n  not a block", "# not a comment\nx",
]


@pytest.fixture
def js_page(browser):
    """A blank page with the inspector's two pure modules loaded from disk (no server needed)."""
    with static_page(browser, "yaml.js", "linediff.js") as page:
        yield page


def test_the_yaml_renderer_round_trips_through_a_yaml_parser(js_page):
    import yaml

    page = js_page
    value = {
        "strings": STRINGS,
        "map": {s: s for s in STRINGS if "\n" not in s} | {"multi\nline key": 1, "": "empty key"},
        "numbers": [0, -3, 2.5, 1e-7, 1e21, 123456789012, True, False, None],
        "empty": {"map": {}, "list": [], "in_list": [{}, []]},
        "nested": [[1, 2], [], [[3]], [{"a": 1, "b": [1, {"c": "d\ne"}], "e": "f\n"}], ["x\ny"]],
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"a":1}\n'}},
    }
    for case in (value, STRINGS, "top\nlevel\n", "yes", [], {}, None, 3):
        text = page.evaluate("v => window.ctrlscopeYaml.toYaml(v)", case)
        assert yaml.safe_load(text) == case, text
    lines = page.evaluate("v => window.ctrlscopeYaml.toYamlLines(v, '<redacted>')",
                          {"data": {"a": "<redacted> (3 chars, #1)", "b": "clear"}})
    assert [(line["text"], line["redacted"]) for line in lines] == [
        ("data:", False), ('  a: "<redacted> (3 chars, #1)"', True), ("  b: clear", False)]


def lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b):
            prev, row[j + 1] = row[j + 1], prev + 1 if x == y else max(row[j + 1], row[j])
    return row[-1]


def test_the_line_diff_is_correct_minimal_and_folds_context(js_page):
    import random

    page = js_page
    rng = random.Random(7)
    cases = [([], []), (["a"], []), ([], ["b"]), (["a", "b"], ["a", "b"])]
    def lines() -> list[str]:
        return [rng.choice("abcd") for _ in range(rng.randint(0, 40))]

    cases += [(lines(), lines()) for _ in range(150)]
    results = page.evaluate("cs => cs.map(([a, b]) => window.ctrlscopeDiff.diffLines(a, b))", cases)
    for (a, b), rows in zip(cases, results, strict=True):
        assert [r["text"] for r in rows if r["op"] != "+"] == a and [r["text"] for r in rows if r["op"] != "-"] == b
        assert sum(r["op"] != " " for r in rows) == len(a) + len(b) - 2 * lcs(a, b), (a, b, rows)

    # One change in 100 lines: 3 lines of context each side, the rest folded.
    old = [f"line {i}" for i in range(100)]
    new = old[:50] + ["line 50 changed"] + old[51:]
    folded = page.evaluate("([a, b]) => window.ctrlscopeDiff.hunks(window.ctrlscopeDiff.diffLines(a, b), 3)",
                           [old, new])
    assert [h.get("fold") for h in folded if "fold" in h] == [47, 46]
    assert [h["row"]["op"] + h["row"]["text"] for h in folded if "row" in h][3:5] == ["-line 50", "+line 50 changed"]

    # Unrelated 3,000-line objects: past MAX_EDITS the diff is still right (removed, then added).
    # The time is printed, not asserted: in a test it measures the machine (2.03 s on a loaded one);
    # MAX_EDITS is what bounds it.
    big = page.evaluate("""() => {
        const a = [], b = [];
        for (let i = 0; i < 3000; i++) { a.push('a' + i); b.push('b' + i); }
        const t = performance.now(), rows = window.ctrlscopeDiff.diffLines(a, b), ms = performance.now() - t;
        const count = (op) => rows.filter(r => r.op === op).length;
        return {ms: ms, removed: count('-'), added: count('+'), ops: rows.map(r => r.op).join('')}; }""")
    print(f"\ndiff of two unrelated 3,000-line renderings: {big['ms']:.0f} ms")
    assert big["removed"] == 3000 and big["added"] == 3000
    assert big["ops"] == "-" * 3000 + "+" * 3000

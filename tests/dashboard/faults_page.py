"""The Faults panel's browser tests (simulator and fault proxy) start the same way: an operator logs in
on the cluster's informer page, waits for its live watches, and opens the Faults panel."""

from __future__ import annotations


def open_faults_panel(page, dashboard, path: str, *, watches_timeout: int, panel_timeout: int) -> None:
    page.goto(dashboard.url + "/accounts/login/?next=" + path)
    page.fill("input[name=username]", "op")
    page.fill("input[name=password]", "s3cret-pass-op")
    page.click("form [type=submit]")
    page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
    try:
        page.wait_for_function("() => [...document.querySelectorAll('#ievents tr')]"
                               ".filter(tr => tr.textContent.includes('WATCH from')).length >= 2",
                               timeout=watches_timeout)
    except Exception as e:  # say what the page showed instead of only that it timed out
        rows = page.eval_on_selector_all("#ievents tr", "trs => trs.slice(-20).map(tr => tr.textContent)")
        raise AssertionError(f"no two live watches on {path}: connection "
                             f"{page.get_attribute('#conn', 'data-state')}, last event rows {rows}") from e
    if not page.evaluate("document.getElementById('faults-panel').open"):
        page.click("#faults-panel > summary")
    page.wait_for_selector('#faults-sim[data-state="ok"]', timeout=panel_timeout)

"""overview_filters.js in real headless Chromium: a controller's state from its findings, the filters
in the URL (a bad value ignored, other parameters kept), what a search keeps, and the collapsed groups'
memory surviving a broken or refusing localStorage."""

from __future__ import annotations

import pytest

from tests.dashboard.static_page import static_page

pytestmark = pytest.mark.browser

@pytest.fixture(scope="module")
def filters(browser):
    with static_page(browser, "protocol.js", "overview_filters.js", vocabulary=True) as page:
        yield page


@pytest.mark.parametrize(("findings", "opts", "state"), [
    ([], {}, "ok"),
    ([], {"started": False}, "standby"),
    ([{"finding": "waiting"}, {"finding": "failing"}], {}, "failing"),
    ([{"finding": "slow_reconcile"}, {"finding": "hot_loop"}, {"finding": "terminal"}], {}, "looping"),
    ([{"finding": "not_synced"}], {"started": False}, "stuck"),
    ([{"finding": "hot_loop"}], {"stale": True}, "stale"),  # a stale worker's findings are its last word
])
def test_a_controllers_state_is_its_worst_finding(filters, findings, opts, state):
    assert filters.evaluate("([f, o]) => window.ctrlscopeOverviewFilters.stateOf(f, o)", [findings, opts]) == state


def test_the_filters_round_trip_through_the_query_and_a_bad_state_is_dropped(filters):
    got = filters.evaluate("""() => {
      const F = window.ctrlscopeOverviewFilters;
      const f = F.parse("?q=%20team-1%20&cluster=prod-eu2&state=exploded&theme=dark");
      const kept = F.parse("?state=problem");
      return { f: f, active: F.active(f), none: F.active(F.parse("")), search: F.search({ q: "a b", cluster: "", worker: "w1", state: "stuck" }, "?theme=dark&q=old"),
               empty: F.search(F.parse(""), ""), kept: kept.state };
    }""")
    assert got["f"] == {"q": "team-1", "cluster": "prod-eu2", "worker": "", "state": ""}
    assert got["active"] is True and got["none"] is False
    assert got["search"] == "?theme=dark&q=a+b&worker=w1&state=stuck"
    assert got["empty"] == "" and got["kept"] == "problem"


def test_a_search_keeps_what_has_every_word(filters):
    got = filters.evaluate("""() => {
      const F = window.ctrlscopeOverviewFilters;
      const item = { cluster: "prod-eu2", worker: "prod-eu2-w0", state: "failing", text: "prod-eu2-w0 prod-eu2 ingress team-4/ingress-017" };
      const keeps = (f) => F.keeps(Object.assign({ q: "", cluster: "", worker: "", state: "" }, f), item);
      return [keeps({}), keeps({ q: "INGRESS team-4" }), keeps({ q: "ingress team-5" }), keeps({ state: "problem" }),
              keeps({ state: "stuck" }), keeps({ cluster: "prod-eu1" }), keeps({ worker: "prod-eu2-w0", state: "failing" })];
    }""")
    assert got == [True, True, False, True, False, False, True]


def test_collapsed_groups_survive_a_broken_or_refusing_storage(filters):
    got = filters.evaluate("""() => {
      const F = window.ctrlscopeOverviewFilters;
      const mem = { v: {}, getItem(k) { return this.v[k] ?? null; }, setItem(k, s) { this.v[k] = s; } };
      const a = F.collapsedStore(mem);
      const before = [a.isCollapsed("x", true), a.isCollapsed("x", false)];
      a.set("y", true); a.setAll(false); a.set("x", true);
      const b = F.collapsedStore(mem);  // another page load: remembered; "expand all" holds for new groups too
      const broken = F.collapsedStore({ getItem: () => "{not json", setItem() {} });
      const array = F.collapsedStore({ getItem: () => "[1,2]", setItem() {} });
      const refusing = F.collapsedStore({ getItem() { throw new Error("denied"); }, setItem() { throw new Error("quota"); } });
      refusing.set("x", true);  // kept in memory for this page
      return { before: before, after: [b.isCollapsed("x", false), b.isCollapsed("y", true), b.isCollapsed("new", true), b.chose("w")],
               broken: broken.isCollapsed("x", true), array: array.isCollapsed("0", false), refusing: refusing.isCollapsed("x", false),
               none: F.collapsedStore(null).isCollapsed("x", true) };
    }""")
    assert got == {"before": [True, False], "after": [True, False, False, False], "broken": True, "array": False,
                   "refusing": True, "none": True}

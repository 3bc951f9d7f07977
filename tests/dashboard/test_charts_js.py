"""charts.js maths, run in real headless Chromium (the browser that runs it on the page): Prometheus'
histogram_quantile interpolation, rate() with counter resets, and quantiles over a window of samples."""

from __future__ import annotations

import math
import random

import pytest

from tests.dashboard.static_page import static_page

pytestmark = pytest.mark.browser

@pytest.fixture(scope="module")
def charts(browser):
    with static_page(browser, "spark.js", "charts.js") as page:
        yield page


def js(page, expr: str, *args):
    return page.evaluate(f"(args) => {{ const C = window.ctrlscopeCharts; return {expr}; }}", list(args))


def prometheus_bucket_quantile(q: float, bounds: list[float], counts: list[float]) -> float:
    """Prometheus' bucketQuantile (promql/quantile.go), transcribed from its Go source, on per-bucket
    counts: the reference the JS must agree with."""
    cum, total = [], 0.0
    for i in range(len(bounds) + 1):
        total += counts[i] if i < len(counts) else 0
        cum.append(total)
    if total == 0:
        return math.nan
    rank = q * total
    b = next((i for i in range(len(cum) - 1) if cum[i] >= rank), len(cum) - 1)
    if b == len(cum) - 1:
        return bounds[-1]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = (bounds[b - 1] if b else 0.0), bounds[b], cum[b] - (cum[b - 1] if b else 0.0)
    return start + (end - start) * ((rank - (cum[b - 1] if b else 0.0)) / count)


def test_histogram_quantile_interpolates_inside_the_bucket_like_prometheus(charts):
    bounds = [0.1, 0.2, 0.5, 1.0]
    # 10 observations ≤ 0.1 s and 10 in (0.1, 0.2]: the median is the first bucket's upper bound,
    # p75 is halfway into the second bucket.
    assert js(charts, "C.histogramQuantile(0.5, args[0], args[1])", bounds, [10, 10]) == pytest.approx(0.1)
    assert js(charts, "C.histogramQuantile(0.75, args[0], args[1])", bounds, [10, 10]) == pytest.approx(0.15)
    assert js(charts, "C.histogramQuantile(0.99, args[0], args[1])", bounds, [0, 0, 4, 0]) == pytest.approx(0.497)
    # A rank in the +Inf bucket: the highest finite bound (Prometheus cannot know more).
    assert js(charts, "C.histogramQuantile(0.99, args[0], args[1])", bounds, [1, 0, 0, 0, 99]) == 1.0
    # No observations: no value (NaN → a gap in the chart), never a made-up 0.
    assert js(charts, "Number.isNaN(C.histogramQuantile(0.5, args[0], args[1]))", bounds, []) is True


def test_histogram_quantile_agrees_with_prometheus_on_random_histograms(charts):
    rng = random.Random(7)
    bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    cases = []
    for _ in range(300):
        counts = [rng.choice((0, 0, 1, 3, 50)) for _ in range(rng.randint(1, len(bounds) + 1))]
        if sum(counts) == 0:
            counts[0] = 1
        cases.append((rng.choice((0.5, 0.9, 0.99, 0.999, rng.random())), counts))
    got = js(charts, "args[0].map(([q, c]) => C.histogramQuantile(q, args[1], c))", cases, bounds)
    want = [prometheus_bucket_quantile(q, bounds, c) for q, c in cases]
    assert got == pytest.approx(want)


def test_rate_is_the_increase_over_the_window_and_survives_a_counter_reset(charts):
    ts = [i * 1000 for i in range(8)]
    values = [0, 2, 4, 6, 8, 1, 3, 5]  # the worker restarted after the fifth sample
    rates = js(charts, "C.rate(args[0], args[1], 3000)", ts, values)
    assert rates[0] is None, "one sample is no rate"
    assert rates[1:5] == [2, 2, 2, 2]
    # Over (2 s, 5 s]: +2 +2, then the reset counts its new value 1 → 5 in 3 s.
    assert rates[5] == pytest.approx(5 / 3)
    assert rates[7] == pytest.approx((1 + 2 + 2) / 3)


def test_quantiles_over_a_window_see_only_the_observations_inside_it(charts):
    bounds = [0.01, 0.1, 1.0]
    # Per-bucket counts since the worker started: fast reconciles (≤ 10 ms), then 10 slow ones (0.1-1 s).
    hists = [{"b": [50]}, {"b": [100]}, {"b": [100, 0, 10]}, {"b": [100, 0, 10]}]
    ts = [0, 1000, 2000, 3000]
    p99 = js(charts, "C.quantile(0.99, args[0], args[1], args[2], 1000)", ts, hists, bounds)
    assert p99[0] is None, "no earlier sample: no rate, no quantile"
    assert p99[1] == pytest.approx(0.01 * 0.99), "50 fast ones in (0 s, 1 s]"
    assert p99[2] == pytest.approx(0.1 + 0.9 * 0.99), "only the slow ones are in (1 s, 2 s]"
    assert p99[3] is None, "nothing observed in (2 s, 3 s]: a gap, not 0"
    wide = js(charts, "C.quantile(0.99, args[0], args[1], args[2], 10000)", ts, hists, bounds)
    assert wide[3] == pytest.approx(0.1 + 0.9 * (0.99 * 60 - 50) / 10), "50 fast + 10 slow since the first sample"

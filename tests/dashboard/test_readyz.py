"""GET /readyz (the Kubernetes readiness probe in deploy/) follows Redis; GET /healthz (liveness) does
not, so a Redis outage takes replicas out of the Service instead of restarting them."""

from __future__ import annotations

import requests

from controllers.telemetry.redisboot import free_port


def test_readyz_is_200_while_redis_answers(dashboard):
    resp = requests.get(dashboard.url + "/readyz", timeout=10)
    assert resp.status_code == 200 and resp.json() == {"ok": True, "redis": "up"}


def test_readyz_is_503_without_redis_and_never_shows_the_url(dashboard_factory):
    # Nothing listens on this port; the URL carries a password that must not reach the response.
    url = f"redis://:not-in-the-body-1234@127.0.0.1:{free_port()}/0"
    dashboard = dashboard_factory(url)
    resp = requests.get(dashboard.url + "/readyz", timeout=10)
    assert resp.status_code == 503 and resp.json() == {"ok": False, "redis": "down"}
    assert "not-in-the-body" not in resp.text and "127.0.0.1" not in resp.text
    assert requests.get(dashboard.url + "/healthz", timeout=10).status_code == 200  # liveness is unaffected

"""The one Redis bootstrap rule: REDIS_URL, else local 6379, else a private server."""

from __future__ import annotations

import pytest

from controllers.telemetry import redisboot
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis, free_port, ping


def test_redis_url_from_the_environment_wins(redis_url, tmp_path):
    handle = ensure_redis(tmp_path, env={"REDIS_URL": redis_url})
    assert handle.url == redis_url and handle.source == "env" and handle.process is None


def test_unreachable_redis_url_is_a_clear_error(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailable, match="does not answer"):
        ensure_redis(tmp_path, env={"REDIS_URL": url})


def test_without_any_redis_a_private_server_is_started_and_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(redisboot, "DEFAULT_URL", f"redis://127.0.0.1:{free_port()}/0")
    handle = ensure_redis(tmp_path, env={})
    try:
        assert handle.source == "private" and ping(handle.url)
        assert (tmp_path / "redis").is_dir()
    finally:
        handle.stop()
    assert not ping(handle.url)


@pytest.mark.parametrize("url", ["localhost:6379", "http://127.0.0.1:6379/0", "redis://127.0.0.1:notaport/0"])
def test_a_malformed_redis_url_is_a_clear_error(url, tmp_path):
    with pytest.raises(RedisUnavailable, match="REDIS_URL"):
        ensure_redis(tmp_path, env={"REDIS_URL": url})

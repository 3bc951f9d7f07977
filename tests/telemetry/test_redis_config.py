"""redis_config: one place turns REDIS_URL / REDIS_SENTINELS into clients; bad values are clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis.asyncio.sentinel as asentinel
import redis.sentinel as sentinel

from controllers.telemetry import redis_config as rc
from tests.conftest import ROOT

SENTINELS = {"REDIS_SENTINELS": "10.0.0.1:26379, sentinel-b:26380,[::1]:26381,sentinel-d", "REDIS_MASTER_NAME": "ctrlscope"}


def test_sentinels_and_a_master_name_make_a_sentinel_url_that_wins_over_redis_url():
    url = rc.url_from_env(SENTINELS)
    assert url == "redis+sentinel://10.0.0.1:26379,sentinel-b:26380,[::1]:26381,sentinel-d:26379/ctrlscope/0"
    target = rc.parse_sentinel_url(url)
    assert target.sentinels == (("10.0.0.1", 26379), ("sentinel-b", 26380), ("::1", 26381), ("sentinel-d", 26379))
    assert target.master_name == "ctrlscope" and target.db == 0 and target.url == url
    # deploy/components/redis-sentinel keeps REDIS_URL naming redis-0 next to the Sentinels
    assert rc.url_from_env({**SENTINELS, "REDIS_URL": "redis://redis-0:6379/0"}) == url
    assert rc.url_from_env({**SENTINELS, "REDIS_URL": url}) == url  # what a parent passes on
    assert rc.url_from_env({"REDIS_URL": "redis+sentinel://h:1/m/3"}) == "redis+sentinel://h:1/m/3"
    assert rc.parse_sentinel_url("redis+sentinel://h:1/m/3").db == 3
    assert rc.url_from_env({"REDIS_URL": "redis://127.0.0.1:6380/2"}) == "redis://127.0.0.1:6380/2"
    assert rc.url_from_env({}, default="redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(("env", "message"), [
    ({"REDIS_SENTINELS": "a:1"}, "REDIS_MASTER_NAME is not"),
    ({"REDIS_MASTER_NAME": "m"}, "without REDIS_SENTINELS"),
    ({"REDIS_SENTINELS": "a:port", "REDIS_MASTER_NAME": "m"}, "port of 'a:port' is not a number"),
    ({"REDIS_SENTINELS": "a:70000", "REDIS_MASTER_NAME": "m"}, "out of range"),
    ({"REDIS_SENTINELS": " , ", "REDIS_MASTER_NAME": "m"}, "no Sentinel address"),
    ({"REDIS_SENTINELS": "::1:26379", "REDIS_MASTER_NAME": "m"}, "IPv6 address in brackets"),
    ({"REDIS_SENTINELS": "a:1,a:1", "REDIS_MASTER_NAME": "m"}, "listed twice"),
    ({"REDIS_SENTINELS": "a:1", "REDIS_MASTER_NAME": "my master"}, "not a Sentinel master name"),
    ({"REDIS_SENTINELS": "a:1", "REDIS_MASTER_NAME": "m", "REDIS_URL": "http://x"}, "not a Redis URL"),
    ({"REDIS_URL": "redis+sentinel://:secret@a:1/m"}, "REDIS_PASSWORD"),
    ({"REDIS_URL": "redis+sentinel://a:1/m/zero"}, "database"),
    ({"REDIS_URL": "redis+sentinel://a:1/"}, "not a Sentinel master name"),
    ({"REDIS_URL": "localhost:6379"}, "REDIS_URL"),
])
def test_bad_values_are_clear_errors(env, message):
    with pytest.raises(rc.RedisConfigError, match=message):
        rc.url_from_env(env)


def test_errors_and_descriptions_never_show_a_password():
    assert rc.describe("redis://:s3cret@h:6379/0") == "redis://:***@h:6379/0"
    assert rc.describe("redis://user:s3cret@h:6379/0") == "redis://user:***@h:6379/0"
    with pytest.raises(rc.RedisConfigError) as info:
        rc.url_from_env({"REDIS_URL": "redis://:s3cret@h:notaport/0"})
    assert "s3cret" not in str(info.value)


def test_clients_and_the_channel_layer_host_follow_the_sentinels_with_the_passwords_from_the_environment():
    url = rc.url_from_env(SENTINELS)
    env = {"REDIS_PASSWORD": "data-pw", "REDIS_SENTINEL_PASSWORD": "sentinel-pw"}
    sync = rc.sync_client(url, env=env, socket_timeout=5, socket_connect_timeout=2)
    pool = sync.connection_pool
    assert isinstance(pool, sentinel.SentinelConnectionPool) and pool.service_name == "ctrlscope"
    assert pool.connection_kwargs["password"] == "data-pw" and pool.connection_kwargs["socket_timeout"] == 5
    assert pool.sentinel_manager.sentinel_kwargs == {"socket_timeout": 2, "socket_connect_timeout": 2,
                                                     "password": "sentinel-pw"}
    assert len(pool.sentinel_manager.sentinels) == 4
    sync.close()
    async_client = rc.async_client(url, env=env, socket_timeout=5, socket_connect_timeout=2)
    assert isinstance(async_client.connection_pool, asentinel.SentinelConnectionPool)
    assert async_client.connection_pool.connection_kwargs["password"] == "data-pw"
    host = rc.channel_layer_host(url, env=env, socket_timeout=None)
    assert host == {"master_name": "ctrlscope", "sentinels": [("10.0.0.1", 26379), ("sentinel-b", 26380),
                                                              ("::1", 26381), ("sentinel-d", 26379)],
                    "sentinel_kwargs": {"socket_timeout": 2.0, "socket_connect_timeout": 2.0, "password": "sentinel-pw"},
                    "db": 0, "socket_timeout": None, "password": "data-pw"}
    # A plain URL: channels-redis' address form; REDIS_PASSWORD only where the URL has none.
    assert rc.channel_layer_host("redis://h:1/0", env={}, socket_timeout=None) == {"address": "redis://h:1/0",
                                                                                   "socket_timeout": None}
    plain = rc.sync_client("redis://h:1/0", env=env)
    assert plain.connection_pool.connection_kwargs["password"] == "data-pw"
    plain.close()
    own = rc.sync_client("redis://:url-pw@h:1/0", env=env)
    assert own.connection_pool.connection_kwargs["password"] == "url-pw"
    own.close()


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    """dashboard.settings imported in a fresh interpreter, as a starting process does."""
    show = ("import json, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'dashboard.settings'; "
            "from django.conf import settings as s; "
            "print(json.dumps([s.REDIS_URL, s.CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]]))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REDIS_")}
    return subprocess.run([sys.executable, "-c", show], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**clean, "CTRLSCOPE_DEMO": "1", **env})


def test_the_dashboard_settings_read_the_sentinels_and_refuse_a_bad_configuration():
    done = _settings(REDIS_SENTINELS="127.0.0.1:26379")
    assert done.returncode != 0 and "ImproperlyConfigured: REDIS_SENTINELS is set but REDIS_MASTER_NAME" in done.stderr
    done = _settings(REDIS_SENTINELS="127.0.0.1:26379", REDIS_MASTER_NAME="ctrlscope")
    assert done.returncode == 0, done.stderr
    url, host = json.loads(done.stdout)
    assert url == "redis+sentinel://127.0.0.1:26379/ctrlscope/0"
    assert host["master_name"] == "ctrlscope" and host["sentinels"] == [["127.0.0.1", 26379]]
    done = _settings()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["redis://127.0.0.1:6379/0",
                                       {"address": "redis://127.0.0.1:6379/0", "socket_timeout": None}]

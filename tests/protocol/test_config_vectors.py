"""protocol/vectors/config: where a publisher connects, from its environment — the Python side
(controllers/telemetry/redis_config.py). The Go publisher runs the same file (go/ctrlscope)."""

from __future__ import annotations

import json

import pytest

from controllers.telemetry import redis_config as rc
from tests.conftest import ROOT

VECTOR = json.loads((ROOT / "protocol" / "vectors" / "config" / "redis-env.json").read_text())


@pytest.mark.parametrize("case", VECTOR["ok"], ids=lambda c: c["url"])
def test_an_environment_names_its_redis(case):
    url = rc.url_from_env(case["env"], default=case.get("default"))
    assert url == case["url"]
    if case["sentinel"] is None:
        assert not rc.is_sentinel(url)
        return
    target = rc.parse_sentinel_url(url)
    want = case["sentinel"]
    assert [list(s) for s in target.sentinels] == want["sentinels"]
    assert (target.master_name, target.db) == (want["master_name"], want["db"])


def check_env_error(case: dict) -> None:
    """A config vector's bad environment (redis-env.json, redis-cluster-env.json) is an error that says
    what the case says, without the password (every vector's passwords contain "secret")."""
    with pytest.raises(rc.RedisConfigError) as info:
        rc.url_from_env(case["env"])
    for part in case["contains"]:
        assert part in str(info.value)
    assert "secret" not in str(info.value)


@pytest.mark.parametrize("case", VECTOR["errors"], ids=lambda c: json.dumps(c["env"]))
def test_a_bad_environment_is_a_clear_error(case):
    check_env_error(case)

"""protocol/vectors/config/redis-cluster-env.json: where a publisher connects when the environment names a
Redis Cluster, and the cluster layout's key names and slots -- the Python side (redis_config.py,
streams.Keys)."""

from __future__ import annotations

import json

import pytest
from redis.crc import key_slot

from controllers.telemetry import redis_config as rc
from controllers.telemetry.streams import Keys
from tests.conftest import ROOT
from tests.protocol.test_config_vectors import check_env_error

VECTOR = json.loads((ROOT / "protocol" / "vectors" / "config" / "redis-cluster-env.json").read_text())


@pytest.mark.parametrize("case", VECTOR["ok"], ids=lambda c: c["url"])
def test_an_environment_names_its_cluster(case):
    url = rc.url_from_env(case["env"])
    assert url == case["url"]
    if case["cluster"] is None:
        assert not rc.is_cluster(url) and not Keys.for_url("p:", url).cluster
        return
    assert [list(n) for n in rc.parse_cluster_url(url).nodes] == case["cluster"]["nodes"]
    assert Keys.for_url("p:", url).cluster
    assert rc.url_from_env({"REDIS_URL": url}) == url, "the canonical URL is passed on unchanged"


@pytest.mark.parametrize("case", VECTOR["errors"], ids=lambda c: json.dumps(c["env"]))
def test_a_bad_cluster_environment_is_a_clear_error(case):
    check_env_error(case)


@pytest.mark.parametrize("case", VECTOR["keys"], ids=lambda c: c["topic"])
def test_a_topics_cluster_keys_share_its_slot(case):
    keys = Keys(case["prefix"], cluster=True)
    topic = case["topic"]
    names = {"stream": keys.stream(topic), "snapshot": keys.snapshot(topic), "pubseq": keys.pubseq(topic),
             "epoch": keys.epoch_of(topic)}
    assert names == {k: case[k] for k in names}
    assert keys.topics == case["topics"]
    assert {key_slot(n.encode()) for n in names.values()} == {case["slot"]}
    assert keys.frame_keys(topic) == [names["stream"], names["snapshot"], names["epoch"], names["pubseq"]]
    assert keys.topic_of_stream(names["stream"]) == topic
    # The v1 layout is untouched: five KEYS, the one epoch, no braces.
    v1 = Keys(case["prefix"])
    assert v1.frame_keys(topic) == [f"{case['prefix']}stream:{topic}", f"{case['prefix']}snap:{topic}",
                                    f"{case['prefix']}epoch", f"{case['prefix']}topics",
                                    f"{case['prefix']}pubseq:{topic}"]


def test_a_brace_in_the_prefix_is_refused_with_a_cluster():
    with pytest.raises(ValueError, match="CTRLSCOPE_PREFIX"):
        Keys("a{b}:", cluster=True)
    assert Keys("a{b}:").stream("t") == "a{b}:stream:t"  # no cluster: any prefix, as before


def test_the_cluster_url_is_described_without_secrets_and_pinged_false_when_nobody_answers():
    url = "redis+cluster://127.0.0.1:1"
    assert rc.describe(url) == url
    assert rc.ping(url, timeout=0.2) is False

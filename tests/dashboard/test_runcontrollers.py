"""The worker command: clear errors for bad arguments, and synthetic load actually published."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from controllers.telemetry.streams import Keys
from tests.conftest import ROOT


def run_worker(*args: str, redis_url: str, prefix: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    return subprocess.run([sys.executable, "manage.py", "runcontrollers", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("args", "message"), [
    ((), "nothing to run"),
    (("--controller", "no-colon"), "expected MODULE:NAME"),
    (("--controller", "no_such_module_xyz:setup"), "cannot import no_such_module_xyz"),
    (("--controller", "controllers.clock:nope"), "has no callable 'nope'"),
    (("--synthetic", "-5"), "must be positive"),
    (("--controller", "controllers.examples.deployments:setup", "--namespace", "Not_A_Namespace"),
     "--namespace 'Not_A_Namespace' is not a namespace name"),
])
def test_bad_arguments_fail_with_a_clear_message(args, message, redis_url, prefix):
    result = run_worker(*args, redis_url=redis_url, prefix=prefix)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_synthetic_load_is_published_with_gap_free_sequence_numbers(redis_url, prefix):
    result = run_worker("--synthetic", "200", "--duration", "1.5", "--status-every", "0",
                        redis_url=redis_url, prefix=prefix)
    assert result.returncode == 0, result.stderr
    import orjson

    r = redis.Redis.from_url(redis_url)
    try:
        frames = [orjson.loads(f[b"f"]) for _, f in r.xrange(Keys(prefix).stream("synthetic"))]
    finally:
        r.close()
    seqs = [rec["seq"] for f in frames for rec in f["r"]]
    assert 250 <= len(seqs) <= 320 and seqs == list(range(1, len(seqs) + 1))

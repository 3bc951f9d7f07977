"""protocol/vectors/derive/ through the dashboard's own browser client (telemetry.js), and
protocol/vectors/liveness/, names/ and backoff/ through its liveness rule, topicPart and rate limiter
derivation (protocol.js), under Node."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from controllers.schema import browser_vocabulary
from tests.conftest import ROOT
from tests.protocol import vectors

NODE = shutil.which("node")
DERIVE = vectors.load("derive")
LIVENESS = vectors.load("liveness")
NAMES = vectors.load("names")
BACKOFF = vectors.load("backoff")


@pytest.mark.skipif(NODE is None, reason="needs node (Debian nodejs) to run the browser's client")
def test_the_browser_client_derives_what_every_derive_vector_says(tmp_path):
    vocabulary = tmp_path / "vocabulary.json"
    vocabulary.write_text(json.dumps(browser_vocabulary()))
    out = subprocess.run([NODE, str(ROOT / "tests" / "protocol" / "derive_vectors.js"),
                          str(ROOT / "dashboard" / "static" / "dashboard"), str(vocabulary),
                          *(str(p) for p, _ in DERIVE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["name"] for r in results] == [v["name"] for _, v in DERIVE]
    for (_, vector), got in zip(DERIVE, results, strict=True):
        expect = dict(vector["expect"])
        assert {k: got[k] for k in expect} == expect, vector["name"]


def run_rules(tmp_path, family: str, loaded) -> list[dict]:
    vocabulary = tmp_path / "vocabulary.json"
    vocabulary.write_text(json.dumps(browser_vocabulary()))
    out = subprocess.run([NODE, str(ROOT / "tests" / "protocol" / "rule_vectors.js"),
                          str(ROOT / "dashboard" / "static" / "dashboard"), str(vocabulary), family,
                          *(str(p) for p, _ in loaded)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["name"] for r in results] == [v["name"] for _, v in loaded]
    return results


@pytest.mark.skipif(NODE is None, reason="needs node (Debian nodejs) to run the browser's liveness rule")
def test_the_pages_judge_liveness_as_every_liveness_vector_says(tmp_path):
    for (_, vector), got in zip(LIVENESS, run_rules(tmp_path, "liveness", LIVENESS), strict=True):
        assert got["got"] == {w: c["expect"] for w, c in vector["workers"].items()}, vector["name"]


@pytest.mark.skipif(NODE is None, reason="needs node (Debian nodejs) to run the browser's topicPart")
def test_the_pages_make_topic_segments_as_every_names_vector_says(tmp_path):
    for (_, vector), got in zip(NAMES, run_rules(tmp_path, "names", NAMES), strict=True):
        assert got["got"] == vector["cases"], vector["name"]


@pytest.mark.skipif(NODE is None, reason="needs node (Debian nodejs) to run the browser's rate limiter derivation")
def test_the_pages_tell_which_limiter_chose_each_delay_as_every_backoff_vector_says(tmp_path):
    for (_, vector), got in zip(BACKOFF, run_rules(tmp_path, "backoff", BACKOFF), strict=True):
        assert got["got"] == vector["cases"], vector["name"]

"""``manage.py faultproxy`` as a user runs it: its safety rules and clear errors, its faults published to
``cluster/faults`` like the simulator's, and no credential in anything it prints or publishes -- with
an upstream reached through an exec plugin, as on EKS or GKE."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.sim.faults_client import SimFaults
from controllers.telemetry.fault_telemetry import TOPIC
from controllers.telemetry.redisboot import free_port
from tests.conftest import ROOT, LoggedProcess, wait_until
from tests.telemetry.test_fault_telemetry import records
from tests.telemetry.test_publisher import read_snapshot


def faultproxy(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "faultproxy", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "CTRLSCOPE_DEMO": "1", **(env or {})})


def kubeconfig(path: Path, server: str, *, user: dict[str, Any] | None = None, context: str = "c") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user or {"token": "t"}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}]}))
    return path


def test_it_refuses_to_start_with_a_clear_error(tmp_path: Path):
    out = str(tmp_path / "out.yaml")
    local = kubeconfig(tmp_path / "local.yaml", f"https://127.0.0.1:{free_port()}")
    remote = kubeconfig(tmp_path / "remote.yaml", "https://192.0.2.10:6443")
    cases = [
        (["--upstream-kubeconfig", str(tmp_path / "missing.yaml")], "missing.yaml does not exist"),
        (["--upstream-kubeconfig", str(local), "--context", "nope"], "has no context 'nope' (it has: c)"),
        (["--upstream-kubeconfig", str(remote)], "is not on this machine"),
        (["--upstream-kubeconfig", str(local), "--listen", "0.0.0.0:0"], "listens on loopback only"),
        (["--upstream-kubeconfig", str(local), "--listen", "localhost"], "--listen takes HOST:PORT"),
        (["--upstream-kubeconfig", str(local), "--kubeconfig", str(local)], "is the upstream kubeconfig"),
        (["--upstream-kubeconfig", str(local)], "the upstream API server at https://127.0.0.1:"),
    ]
    for args, message in cases:
        done = faultproxy(*args, "--no-telemetry", *([] if "--kubeconfig" in args else ["--kubeconfig", out]))
        assert done.returncode == 1 and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert not os.path.exists(out)
    # The refusal of a remote upstream names the flag that allows it.
    assert "--allow-remote-upstream" in faultproxy("--upstream-kubeconfig", str(remote), "--no-telemetry").stderr


def redis_dump(url: str, prefix: str) -> bytes:
    """Every value under ``prefix`` in Redis, whatever its type: what the proxy published, all of it."""
    r = redis.Redis.from_url(url)
    chunks: list[bytes] = []
    try:
        for key in r.scan_iter(match=f"{prefix}*"):
            kind = r.type(key)
            if kind == b"string":
                chunks.append(r.get(key) or b"")
            elif kind == b"hash":
                chunks += [k + v for k, v in r.hgetall(key).items()]
            elif kind == b"stream":
                chunks += [k + v for _, fields in r.xrange(key) for k, v in fields.items()]
            elif kind == b"list":
                chunks += r.lrange(key, 0, -1)
            elif kind == b"set":
                chunks += list(r.smembers(key))
            elif kind == b"zset":
                chunks += r.zrange(key, 0, -1)
    finally:
        r.close()
    return b"\n".join(chunks)


PLUGIN = textwrap.dedent("""\
    import json, sys, yaml
    token = yaml.safe_load(open(sys.argv[1]))["users"][0]["user"]["token"]
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                      "status": {"token": token}}))
""")


@pytest.mark.realcluster
def test_faults_are_published_like_the_simulators_and_no_credential_is_printed_or_published(
        realcluster, real_namespace, tmp_path: Path, redis_url: str, prefix: str):
    admin = yaml.safe_load(Path(realcluster.kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    token = admin["users"][0]["user"]["token"]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump({**admin, "users": [{"name": admin["users"][0]["name"], "user": {"token": "wrong"}}]}))
    refused = faultproxy("--upstream-kubeconfig", str(wrong), "--kubeconfig", str(tmp_path / "x.yaml"), "--no-telemetry")
    assert refused.returncode == 1 and "refused the credentials of context" in refused.stderr, refused.stderr
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    upstream = tmp_path / "exec.yaml"
    upstream.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "real",
        "clusters": [{"name": "real", "cluster": cluster}],
        "users": [{"name": "plugin", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                       "command": sys.executable,
                                                       "args": [str(plugin), str(realcluster.kubeconfig)],
                                                       "interactiveMode": "Never"}}}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": "plugin", "namespace": real_namespace}}]}))
    out = tmp_path / "proxy.yaml"
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "PYTHONUNBUFFERED": "1", "REDIS_URL": redis_url,
           "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_RUN_DIR": str(tmp_path)}
    proc = LoggedProcess([sys.executable, "manage.py", "faultproxy", "--upstream-kubeconfig", str(upstream),
                          "--kubeconfig", str(out)], env, tmp_path / "faultproxy.log", cwd=ROOT)
    try:
        proc.wait_for_output(f"faults published to topic {TOPIC}")
        assert "fault proxy listening on https://127.0.0.1:" in proc.output()
        mine = yaml.safe_load(out.read_text())
        assert mine["contexts"][0]["context"]["namespace"] == real_namespace
        client = KubernetesClient.from_kubeconfig(str(out))
        assert client.get_json(f"/api/v1/namespaces/{real_namespace}")["metadata"]["name"] == real_namespace
        faults = SimFaults(client, timeout=30).as_actor("op")
        faults.errors(verb="create", resource="pods", rate=0.5, code=503)
        faults.latency(verb="list", resource="*", ms=100)
        faults.drop_watches()
        faults.compact_history()
        faults.kill_pods(1, real_namespace)
        with pytest.raises(ApiError):
            faults.reset()
        wait_until(lambda: len(records(redis_url, prefix)) == 5, timeout=10, what="five fault records")
        got = records(redis_url, prefix)
        assert [r["fault"] for r in got] == ["errors", "latency", "drop-watches", "compact", "kill-pods"]
        assert {r["by"] for r in got} == {"op"} and got[0]["params"] == {"verb": "create", "resource": "pods",
                                                                           "rate": 0.5, "code": 503}
        state = wait_until(lambda: read_snapshot(redis_url, prefix, TOPIC)[1], timeout=5)
        assert state["simulator"]["backend"] == "fault proxy" and state["simulator"]["running"]
        assert state["simulator"]["upstream"] == cluster["server"] and state["simulator"]["url"] == mine[
            "clusters"][0]["cluster"]["server"]
        assert state["rules"]["errors"] == [{"verb": "create", "resource": "pods", "rate": 0.5, "code": 503}]

        secrets = {"the upstream's token": token.encode(),
                   "the upstream's CA": cluster["certificate-authority-data"].encode(),
                   "the upstream's CA certificate": base64.b64decode(cluster["certificate-authority-data"])[30:90],
                   "the proxy's token": mine["users"][0]["user"]["token"].encode(),
                   "the proxy's CA": mine["clusters"][0]["cluster"]["certificate-authority-data"].encode()}
        published = redis_dump(redis_url, prefix)
        printed = proc.log.read_bytes()
        for what, secret in secrets.items():
            assert secret not in published, f"{what} was published"
            assert secret not in printed, f"{what} was printed"
        proc.proc.send_signal(signal.SIGTERM)
        proc.proc.wait(20)
    finally:
        proc.stop()
    assert proc.proc.returncode == 0, proc.output()[-2000:]
    assert not out.exists(), "the proxy's kubeconfig (its token) outlived it"
    _, state = read_snapshot(redis_url, prefix, TOPIC)
    assert not state["simulator"]["running"] and "rules" not in state
    for what, secret in secrets.items():
        assert secret not in proc.log.read_bytes(), f"{what} was printed on the way out"

"""``python manage.py simcluster`` as users run it: a subprocess that prints its URL, writes a
kubeconfig real clients accept, and saves --state when it receives SIGTERM."""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client, config

from tests.sim.conftest import simcluster_command, terminate

ROOT = Path(__file__).resolve().parents[2]


def test_simcluster_command_serves_writes_kubeconfig_and_saves_state_on_sigterm(tmp_path: Path) -> None:
    kubeconfig, state = tmp_path / "kc.yaml", tmp_path / "state.json"
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "PYTHONUNBUFFERED": "1"}
    with simcluster_command("--kubeconfig", str(kubeconfig), "--state", str(state), "--no-telemetry", env=env) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("simulated cluster listening on http://127.0.0.1:"), first
        assert str(kubeconfig) in proc.stdout.readline()
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            v1 = client.CoreV1Api(api)
            assert {"default", "kube-system"} <= {n.metadata.name for n in v1.list_namespace().items}
            v1.create_namespaced_config_map("default", {"metadata": {"name": "persisted"}})
        out, err = terminate(proc)
    assert proc.returncode == 0, err
    assert "stopping simulated cluster" in out
    assert b'"persisted"' in state.read_bytes()


def test_a_second_run_on_the_same_redis_replaces_the_first_runs_simulator_state(tmp_path: Path, redis_url: str,
                                                                                prefix: str) -> None:
    """Two ``simcluster`` runs one after the other on one Redis: the faults topic says the second one
    runs (its frames are not taken for retries of the first run's), and the first run's presence
    entry says it stopped."""
    import time

    import redis

    from controllers.schema import FAULTS_TOPIC
    from controllers.telemetry import presence
    from controllers.telemetry.streams import Keys
    from tests.telemetry.test_publisher import read_snapshot

    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "PYTHONUNBUFFERED": "1", "REDIS_URL": redis_url,
           "CTRLSCOPE_PREFIX": prefix}
    urls: list[str] = []
    logs: tuple[str, str] = ("", "")  # the previous run's output, for the assertion messages
    for run in range(2):
        with simcluster_command("--kubeconfig", str(tmp_path / f"kc{run}.yaml"), env=env) as proc:
            assert proc.stdout is not None
            urls.append(proc.stdout.readline().split()[-1])
            deadline = time.time() + 20
            while time.time() < deadline:
                sim = read_snapshot(redis_url, prefix, FAULTS_TOPIC)[1].get("simulator") or {}
                if sim.get("url") == urls[-1] and sim.get("running"):
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"run {run + 1}'s simulator never showed as running: {sim}")
            if run == 1:
                client = redis.Redis.from_url(redis_url)
                try:
                    while time.time() < deadline + 10:
                        runs = [p for p in presence.read_publishers(client, Keys(prefix)) if p["role"] == "simulator"]
                        if len(runs) == 2:
                            break
                        time.sleep(0.1)
                finally:
                    client.close()
                assert [p["alive"] for p in runs] == [True, False], [(p["pid"], p["seen"], p["stopped"], time.time()) for p in runs]
                assert runs[0]["src"] == sim["run"] and runs[1]["stopped"], logs
            logs = terminate(proc)
    assert urls[0] != urls[1]

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

"""docker-compose.yml must validate with Docker Compose (no engine is needed for `config`), and run
the real thing: the simulator, the example controllers against it and the dashboard after its
migrations, with Redis, never the synthetic load generator."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def compose_config(*args: str) -> str:
    """``docker compose config ARGS`` of the repository's file; skipped (failed in CI) without Compose."""
    cmd = compose_command()
    if cmd is None:
        if os.environ.get("CI"):
            pytest.fail("neither `docker compose` nor `docker-compose` found: .ci/run installs docker-compose")
        pytest.skip("Docker Compose is not installed (apt-get install docker-compose)")
    env = {**os.environ, "CTRLSCOPE_SECRET_KEY": "validate-only"}
    result = subprocess.run([*cmd, "-f", str(ROOT / "docker-compose.yml"), "config", *args],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_docker_compose_config_validates():
    assert set(compose_config("--services").split()) >= {"redis", "simcluster", "samples", "worker", "kopf", "migrate", "web"}


def resolved() -> dict:
    """The compose file as Compose resolves it (anchors merged, variables substituted)."""
    return yaml.safe_load(compose_config())["services"]


def argv(service: dict) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else list(command)


def test_compose_runs_the_simulator_the_example_controllers_and_the_dashboard():
    services = resolved()
    for name, service in services.items():
        assert "--synthetic" not in argv(service), f"{name} runs the synthetic load generator"
    app = {name: s for name, s in services.items() if name != "redis"}
    assert {s["image"] for s in app.values()} == {"ctrlscope:latest"}, "one image, the one deploy/ runs"
    assert argv(services["simcluster"])[:3] == ["python", "manage.py", "simcluster"]
    worker = argv(services["worker"])
    assert worker[:3] == ["python", "manage.py", "runcontrollers"]
    from dashboard.management.commands.demo import DEFAULT_CONTROLLERS, KOPF_RESOURCE

    controllers = [worker[i + 1] for i, a in enumerate(worker) if a == "--controller"]
    assert controllers == DEFAULT_CONTROLLERS and worker[worker.index("--kopf") + 1] == KOPF_RESOURCE
    assert "--leader-elect" in worker and "--allow-writes" not in worker  # the simulator allows writes itself
    assert argv(services["kopf"])[:3] == ["python", "manage.py", "runkopf"]
    assert argv(services["samples"])[:3] == ["python", "manage.py", "samples"]
    assert argv(services["migrate"])[:3] == ["python", "manage.py", "migrate"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert argv(services["web"])[-1] == "dashboard.asgi:application"
    for name in ("samples", "worker", "kopf"):
        assert services[name]["depends_on"]["simcluster"]["condition"] == "service_healthy", name
    kubeconfig = yaml.safe_load((ROOT / "compose" / "kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "http://simcluster:6443"
    for name in ("samples", "worker", "kopf"):
        path = argv(services[name])[argv(services[name]).index("--kubeconfig") + 1]
        assert any(str(v).endswith(f":{path}:ro") or (isinstance(v, dict) and v.get("target") == path)
                   for v in services[name]["volumes"]), f"{name}: {path} is not mounted"
    # Published on the host's loopback only.
    for name, service in services.items():
        for port in service.get("ports") or []:
            assert str(port if not isinstance(port, dict) else port.get("host_ip")).startswith("127.0.0.1"), name


def test_compose_sets_only_settings_the_app_reads():
    sources = "\n".join(p.read_text() for top in ("controllers", "dashboard") for p in (ROOT / top).rglob("*.py"))
    for name, service in resolved().items():
        for var in service.get("environment") or {}:
            assert f'"{var}"' in sources, f"{name}: {var} is read nowhere in controllers/ or dashboard/"


def test_compose_refuses_to_start_without_a_secret_key():
    cmd = compose_command()
    if cmd is None:
        pytest.skip("Docker Compose is not installed")
    env = {k: v for k, v in os.environ.items() if k != "CTRLSCOPE_SECRET_KEY"}
    result = subprocess.run([*cmd, "-f", str(ROOT / "docker-compose.yml"), "config"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0 and "CTRLSCOPE_SECRET_KEY" in (result.stderr + result.stdout)

"""docker-compose.yml must validate with Docker Compose (no engine is needed for `config`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_validates():
    cmd = compose_command()
    if cmd is None:
        if os.environ.get("CI"):
            pytest.fail("neither `docker compose` nor `docker-compose` found: .ci/run installs docker-compose")
        pytest.skip("Docker Compose is not installed (apt-get install docker-compose)")
    env = {**os.environ, "CTRLSCOPE_SECRET_KEY": "validate-only"}
    result = subprocess.run([*cmd, "-f", str(ROOT / "docker-compose.yml"), "config", "--services"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) >= {"redis", "web", "worker"}


def test_compose_refuses_to_start_without_a_secret_key():
    cmd = compose_command()
    if cmd is None:
        pytest.skip("Docker Compose is not installed")
    env = {k: v for k, v in os.environ.items() if k != "CTRLSCOPE_SECRET_KEY"}
    result = subprocess.run([*cmd, "-f", str(ROOT / "docker-compose.yml"), "config"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0 and "CTRLSCOPE_SECRET_KEY" in (result.stderr + result.stdout)

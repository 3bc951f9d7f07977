"""Fixtures for kopf operators: a simulator process (``manage.py simcluster``, publishing its faults to
this test's prefix), the PodSet CRD on it, and real kopf operators run the two ways a user runs one:

- ``mode="plain"``: ``kopf run`` (kopf's own CLI, no ctrlscope at all), for the zero-code tests and
  for comparing an operator's behaviour with and without ctrlscope;
- ``mode="inprocess"``: ``manage.py runkopf ... -- <the same kopf arguments>``.

``kopf_version`` runs an operator with another kopf than the venv's: the versions in
``requirements-kopf.txt`` are installed into ``.venv/kopf/<version>`` by ``make test`` and put first
on PYTHONPATH. The handler files the tests run are in ``tests/kopf/operators/``.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers.examples.podset import API_VERSION, ensure_crd, podset
from controllers.informers.http_client import KubernetesClient
from tests.conftest import ROOT, LoggedProcess
from tests.dashboard.test_faults_browser import sim_kubeconfig  # noqa: F401  (the simulator process)

OPERATORS = Path(__file__).parent / "operators"
KOPF_TARGETS = ROOT / ".venv" / "kopf"


def kopf_versions() -> list[str]:
    """The venv's kopf first, then every extra version requirements-kopf.txt pins."""
    from importlib import metadata

    extra = [line.split("==", 1)[1].strip() for line in (ROOT / "requirements-kopf.txt").read_text().splitlines()
             if line.startswith("kopf==")]
    return [metadata.version("kopf"), *extra]


def kopf_env(version: str | None) -> dict[str, str]:
    """Environment additions that make ``import kopf`` load ``version`` (None: the venv's)."""
    from importlib import metadata

    if version is None or version == metadata.version("kopf"):
        return {}
    target = KOPF_TARGETS / version
    if not target.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"kopf {version} is not installed in {target}: `make test` installs requirements-kopf.txt")
        pytest.skip(f"kopf {version} is not installed in {target} (make .venv/kopf/.stamp)")
    return {"PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


class KopfOperator(LoggedProcess):
    """One operator process, run from the repository's root; its output goes to a log file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        super().__init__(argv, env, log, cwd=ROOT)


@pytest.fixture
def kube(sim_kubeconfig: Path) -> KubernetesClient:  # noqa: F811
    """A client of the test's simulator, with the PodSet CRD installed."""
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    ensure_crd(client)
    return client


@pytest.fixture
def namespace(kube: KubernetesClient) -> str:
    name = f"k-{uuid.uuid4().hex[:6]}"
    kube.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    return name


def create_podset(kube: KubernetesClient, namespace: str, name: str, *, replicas: int = 1,
                  implementation: str = "kopf", **spec: object) -> dict:
    body = podset(name, implementation, replicas, namespace=namespace)
    body["spec"].update(spec)
    return kube.send_json("POST", f"/apis/{API_VERSION}/namespaces/{namespace}/podsets", body)


def get_podset(kube: KubernetesClient, namespace: str, name: str) -> dict:
    return kube.get_json(f"/apis/{API_VERSION}/namespaces/{namespace}/podsets/{name}")


@pytest.fixture
def kopf_operator(request: pytest.FixtureRequest, redis_url: str, prefix: str, tmp_path: Path) -> Iterator:
    """``start(handlers, namespace, mode="inprocess"|"plain", worker=..., kopf_version=None, *extra)``;
    against the test's simulator unless ``kubeconfig`` names another cluster (a real one needs
    ``allow_writes``: runkopf refuses to act on a cluster that is not the simulator without it)."""
    started: list[KopfOperator] = []

    def start(handlers: str | Path, namespace: str, *, mode: str = "inprocess", worker: str = "kopf-test",
              kopf_version: str | None = None, extra: tuple[str, ...] = (), env: dict[str, str] | None = None,
              kubeconfig: Path | None = None, allow_writes: bool = False) -> KopfOperator:
        path = handlers if isinstance(handlers, Path) else OPERATORS / handlers
        kopf_args = ["--standalone", "-n", namespace, str(path), *extra]
        cluster = kubeconfig or request.getfixturevalue("sim_kubeconfig")
        full_env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
                    "CTRLSCOPE_RUN_DIR": str(tmp_path), **kopf_env(kopf_version), **(env or {})}
        if mode == "plain":
            full_env["KUBECONFIG"] = str(cluster)
            argv = [sys.executable, "-m", "kopf", "run", *kopf_args]
        elif mode == "inprocess":
            argv = [sys.executable, "manage.py", "runkopf", "--worker-name", worker, "--kubeconfig", str(cluster),
                    *(["--allow-writes"] if allow_writes else []), "--", *kopf_args]
        else:
            raise ValueError(f"mode {mode!r}: plain or inprocess")
        op = KopfOperator(argv, full_env, tmp_path / f"kopf-{mode}-{len(started)}.log")
        started.append(op)
        return op

    yield start
    for op in reversed(started):
        op.stop()

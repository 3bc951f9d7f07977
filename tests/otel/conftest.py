"""Fixtures for the OpenTelemetry tests: a real OpenTelemetry Collector on loopback
(``controllers.realcluster.otelcol``), built once from the Go module proxy and cached outside the
clone (``make test`` builds it before the suite runs; a missing one is built here, under a lock).

Without a Go toolchain these tests are skipped on a developer's machine and fail in CI, which
always has one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers import golang
from tests.dashboard.test_faults_browser import sim_kubeconfig  # noqa: F401  (manage.py simcluster)
from tests.runtime.conftest import sim  # noqa: F401  (the simulator in-process, over real HTTP)


@pytest.fixture(scope="session")
def otelcol_binary() -> Path:
    if golang.find_go() is None:
        if os.environ.get("CI") and not golang.skipped():
            pytest.fail("no Go toolchain in CI: make test should have provided one (scripts/go-toolchain)")
        pytest.skip("no Go toolchain to build the OpenTelemetry Collector with")
    from controllers.realcluster.otelcol import ensure_built

    return ensure_built(say=lambda line: None)


@pytest.fixture
def otel_collector(otelcol_binary: Path, tmp_path: Path) -> Iterator:
    """A running collector for one test (``controllers.realcluster.otelcol.Collector``): OTLP/HTTP on
    ``.endpoint``, what it received in ``.spans()``."""
    from controllers.realcluster.otelcol import Collector

    with Collector(otelcol_binary, tmp_path / "otelcol") as collector:
        yield collector

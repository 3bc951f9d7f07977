"""Fixtures for the OpenTelemetry tests: a real OpenTelemetry Collector on loopback
(``controllers.realcluster.otelcol``), built once from the Go module proxy and cached outside the
clone. ``make test`` builds it before pytest starts (``make otelcol``); a plain ``pytest`` that
collects these tests builds a missing one once collection is done, in the main process, before any
test runs (2-3 minutes cold: not under a test's timeout), as tests/conftest.py does for the real
control plane.

Without a Go toolchain these tests are skipped on a developer's machine and fail in CI (``CI`` set,
Go not turned off with ``CTRLSCOPE_SKIP_GO``), which always has one; a collector that fails to
build fails them everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers import golang
from tests.dashboard.test_faults_browser import sim_kubeconfig  # noqa: F401  (manage.py simcluster)
from tests.runtime.conftest import sim  # noqa: F401  (the simulator in-process, over real HTTP)


def pytest_collection_finish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the main process built it before handing out tests
    if golang.find_go() is None:
        return  # otelcol_binary skips or fails each test, saying why
    if not any("otelcol_binary" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    from controllers.realcluster.otelcol import ensure_built

    ensure_built(say=lambda line: print(line, flush=True))


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

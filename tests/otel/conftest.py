"""Fixtures for the OpenTelemetry tests. The real OpenTelemetry Collector on loopback
(``otelcol_binary``, ``otel_collector``) is tests/conftest.py's, shared with the Go sink's test:
built once from the Go module proxy and cached outside the clone (``make otelcol``; a plain
``pytest`` builds a missing one after collection, in the main process)."""

from __future__ import annotations

from tests.dashboard.test_faults_browser import sim_kubeconfig  # noqa: F401  (manage.py simcluster)
from tests.runtime.conftest import sim  # noqa: F401  (the simulator in-process, over real HTTP)



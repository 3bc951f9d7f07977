"""What ``bench/soak.py --real`` reads of the control plane's own memory: the API server's PodSet
watch cache capacity and Go heap, etcd's database file (``_control_plane_gauges``), and the line
the table makes of them, saying when the watch cache changed size (``_control_plane_lines``): the
API server's RSS steps follow its watch cache doubling, an upstream bounded cache, not a leak."""

from __future__ import annotations

import pytest

from bench import soak
from controllers.examples.podset import ensure_crd
from controllers.informers.http_client import KubernetesClient
from tests.conftest import wait_until


@pytest.mark.realcluster
def test_the_soak_reads_the_watch_cache_heap_and_database_from_the_control_planes_metrics(realcluster):
    ensure_crd(KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig)))
    # The PodSet cacher exists once the CRD is served; its capacity starts at 100 events.
    wait_until(lambda: soak._control_plane_gauges(realcluster)["PodSet watch cache events"] > 0, timeout=30,
               what="the PodSet watch cache in the API server's metrics")
    gauges = soak._control_plane_gauges(realcluster)
    assert gauges["PodSet watch cache events"] >= 100, gauges
    assert gauges["API server Go heap in use MiB"] > 10, gauges
    assert gauges["etcd db MiB"] > 0, gauges


def _result(gauges: list[tuple[float, dict[str, float]]]) -> soak.SoakResult:
    return soak.SoakResult(minutes=60, rate=300, warmup_s=600, elapsed_s=4200, processes=[], tabs=[], writes_ok=1,
                           writes_failed=0, worker_records=0, worker_frames=0, worker_dropped=0,
                           redis_used_mib=(1.0, 2.0, 2.0), started="", machine="", control_plane=gauges)


def test_the_table_says_when_the_watch_cache_changed_size():
    key, heap, db = "PodSet watch cache events", "API server Go heap in use MiB", "etcd db MiB"
    gauges = [(60.0, {key: 3200, heap: 300, db: 40}), (600.0, {key: 6400, heap: 420, db: 120}),
              (1500.0, {key: 12800, heap: 660, db: 130}), (4200.0, {key: 12800, heap: 670, db: 131})]
    (line,) = soak._control_plane_lines(_result(gauges))
    # After warm-up (the first sample from 600 s on) → the end; the change before warm-up is listed too.
    assert "PodSet watch cache events 6,400 → 12,800" in line and "API server Go heap in use MiB 420 → 670" in line
    assert "3,200 → 6,400 at 10.0 min; 6,400 → 12,800 at 25.0 min" in line
    (steady,) = soak._control_plane_lines(_result([(600.0, {key: 6400}), (4200.0, {key: 6400})]))
    assert steady.endswith("the watch cache kept its size")
    assert soak._control_plane_lines(_result([])) == [], "the simulator's soak has no such line"

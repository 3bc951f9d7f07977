"""The GC freezer used by a dedicated simulator process: frozen while running, thawed on stop."""

from __future__ import annotations

import gc

from controllers.sim import SimCluster
from tests.sim.conftest import eventually


def test_gc_freezer_freezes_long_lived_objects_and_thaws_on_stop() -> None:
    with SimCluster(port=0, gc_freeze=True):
        eventually(lambda: gc.get_freeze_count() > 0)
    assert gc.get_freeze_count() == 0

"""A kopf operator for the tests: an update handler that takes a while, so events pile up behind it."""

import time

import kopf

SELECT = {"labels": {"demo.ctrlscope.dev/implementation": "kopf"}}


@kopf.on.update("demo.ctrlscope.dev", "v1", "podsets", field="spec.replicas", **SELECT)
def replicas_changed(old, new, logger, **_):
    logger.info(f"replicas {old} -> {new}")
    time.sleep(1.0)

"""The operator bench/kopf.py runs: one create handler per PodSet labelled ``implementation=kopf-bench``."""

import kopf


@kopf.on.create("demo.ctrlscope.dev", "v1", "podsets", labels={"demo.ctrlscope.dev/implementation": "kopf-bench"})
def created(patch, logger, **_):
    logger.info("handled")
    patch.status["handled"] = True

"""A kopf operator for the tests: one handler retried through TemporaryError, one that fails for good.

On create of a PodSet labelled ``implementation=kopf``: ``create_fn`` raises ``TemporaryError(delay=1)``
on its first two attempts and succeeds on the third, recording that in the status; ``audit`` raises
``PermanentError`` when ``spec.audit`` is ``"fail"`` (kopf never retries it). Plain kopf: no ctrlscope.
"""

import kopf

SELECT = {"labels": {"demo.ctrlscope.dev/implementation": "kopf"}}


@kopf.on.create("demo.ctrlscope.dev", "v1", "podsets", **SELECT)
def create_fn(retry, logger, patch, **_):
    logger.info(f"create_fn attempt {retry + 1}")
    if retry < 2:
        raise kopf.TemporaryError(f"not ready yet (attempt {retry + 1})", delay=1)
    patch.status["created"] = {"attempts": retry + 1}
    return {"attempts": retry + 1}


@kopf.on.create("demo.ctrlscope.dev", "v1", "podsets", **SELECT)
def audit(spec, **_):
    if spec.get("audit") == "fail":
        raise kopf.PermanentError("audit refused this PodSet")
    return {"audit": "ok"}

"""A kopf operator that stores its progress and diff-base under its own annotation prefix
(``ops.example.com``) instead of kopf's default: zero-code mode sees it only with ``--kopf-prefix``."""

import kopf

PREFIX = "ops.example.com"


@kopf.on.startup()
def configure(settings, **_):
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=PREFIX)
    settings.persistence.finalizer = f"{PREFIX}/finalizer"


@kopf.on.create("demo.ctrlscope.dev", "v1", "podsets")
def provision(retry, **_):
    if retry < 1:
        raise kopf.TemporaryError("waiting for capacity", delay=1)

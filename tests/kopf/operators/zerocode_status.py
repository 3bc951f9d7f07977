"""A kopf operator that stores its progress in ``status.kopf.progress`` (``StatusProgressStorage``)
instead of annotations, for the zero-code samples and ``--kopf-storage status``."""

import kopf

RESOURCE = ("demo.ctrlscope.dev", "v1", "podsets")


@kopf.on.startup()
def configure(settings, **_):
    settings.posting.enabled = False
    settings.persistence.progress_storage = kopf.StatusProgressStorage()


@kopf.on.create(*RESOURCE)
def retrying(retry, **_):
    if retry < 1:
        raise kopf.TemporaryError("not yet", delay=1)


@kopf.on.create(*RESOURCE)
def second(**_):
    pass

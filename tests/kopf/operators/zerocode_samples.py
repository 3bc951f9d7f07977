"""A kopf operator that exercises every kind of progress kopf stores, for the zero-code samples
(``tests/kopf/samples/capture_zerocode.py``): TemporaryError retries, a PermanentError, an ordinary
exception retried after the handler's backoff, a handler given up after its retries, an id longer
than 63 characters (stored cut and hashed) and one of 50 (stored twice: kopf's old and new key
names), a parent waiting for its sub-handler, a field handler on update and a delete handler."""

import kopf

RESOURCE = ("demo.ctrlscope.dev", "v1", "podsets")


@kopf.on.startup()
def configure(settings, **_):
    settings.posting.enabled = False


@kopf.on.create(*RESOURCE)
def retrying(retry, **_):
    if retry < 2:
        raise kopf.TemporaryError("not yet", delay=1)


@kopf.on.create(*RESOURCE)
def permanent(**_):
    raise kopf.PermanentError("never")


@kopf.on.create(*RESOURCE, id="a_really_long_handler_identifier_that_needs_hashing_for_sure_yes_indeed")
def long_id(retry, **_):
    if retry < 1:
        raise kopf.TemporaryError("long not yet", delay=1)


@kopf.on.create(*RESOURCE, id="a_medium_length_handler_id_of_fifty_chars_xxxxyyyy", backoff=1)
def medium_id(retry, **_):
    if retry < 1:
        raise ValueError("boom")


@kopf.on.create(*RESOURCE)
def parent(**_):
    @kopf.subhandler(id="child")
    def child(retry, **_):
        if retry < 1:
            raise kopf.TemporaryError("child wait", delay=1)


@kopf.on.create(*RESOURCE, retries=2, backoff=0.5)
def limited(**_):
    raise ValueError("always")


@kopf.on.update(*RESOURCE, field="spec.replicas")
def scaled(retry, **_):
    if retry < 1:
        raise kopf.TemporaryError("scaling", delay=1)


@kopf.on.delete(*RESOURCE)
def cleanup(retry, **_):
    if retry < 1:
        raise kopf.TemporaryError("cleaning", delay=1)

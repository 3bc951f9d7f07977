"""kopf operators in ctrlscope: two ways to see one.

- **In-process** (``controllers.kopf.inprocess``, ``manage.py runkopf``): the operator runs with
  kopf's own machinery, unmodified, inside a process that also publishes protocol v1.1: every
  handler invocation, the per-object processing, each watch stream, the object loggers' lines.
- **Zero-code** (``controllers.kopf.zerocode``, ``manage.py runcontrollers --kopf RESOURCE``): the
  operator runs anywhere; a ctrlscope informer on its resource reads the progress kopf stores on
  each object (annotations or status) and publishes the same per-object handler view.

Both publish one controller per resource, named by ``controller_name``, so the two pages of one
operator are the same page with a different ``mode``.
"""

from __future__ import annotations


def controller_name(group: str, plural: str) -> str:
    """The controller a kopf operator's handlers of one resource are shown as: ``kopf/{plural}.{group}``
    (``kopf/{plural}`` for the core group), e.g. ``kopf/podsets.demo.ctrlscope.dev``."""
    return f"kopf/{plural}.{group}" if group else f"kopf/{plural}"


def informer_name(api_version: str, kind: str, namespace: str | None = None) -> str:
    """An informer (a kopf watch stream) of ``kind``: ``{apiVersion}/{Kind}`` like ctrlscope's own,
    with ``@{namespace}`` when the stream watches one namespace only (kopf runs one per namespace)."""
    base = f"{api_version}/{kind}"
    return f"{base}@{namespace}" if namespace else base


ACTIVITIES = "kopf/activities"
"""The controller operator-level activities (startup, cleanup, login, probe) are shown as; their
key is the activity's name."""

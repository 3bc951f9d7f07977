"""Who may see and who may change things.

Viewers read; operators (members of the ``operators`` group, or superusers) may trigger actions
that change a cluster. Anonymous read-only access exists only when ``CTRLSCOPE_ALLOW_ANONYMOUS`` is
switched on explicitly (``make demo`` does so on loopback and prints that it did).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

OPERATORS_GROUP = "operators"


def can_view(user: Any) -> bool:
    if user is not None and getattr(user, "is_authenticated", False):
        return bool(user.is_active)
    return bool(settings.CTRLSCOPE_ALLOW_ANONYMOUS)


def is_operator(user: Any) -> bool:
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return bool(user.is_superuser or user.groups.filter(name=OPERATORS_GROUP).exists())

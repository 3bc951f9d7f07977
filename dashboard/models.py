"""The dashboard's own table: which users single sign-on manages (dashboard/sso.py, dashboard/oidc.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ExternalIdentity(models.Model):
    """A user the identity provider manages: signed in by the trusted proxy or by OIDC, with an
    unusable password; their role follows the provider's groups on every request (proxy) or every
    renewal (OIDC), so editing their groups here has no lasting effect."""

    PROXY = "proxy"
    OIDC = "oidc"
    SOURCES = [(PROXY, "trusted proxy"), (OIDC, "OpenID Connect")]

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    source = models.CharField(max_length=16, choices=SOURCES)
    # The proxy's user header, or the OIDC subject (``sub``).
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)  # as last seen
    role = models.CharField(max_length=16, blank=True)  # "operator", "viewer" or "" (no access)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "subject"], name="external_identity_source_subject")]
        verbose_name_plural = "external identities"

    def __str__(self) -> str:
        return f"{self.source}:{self.subject}"

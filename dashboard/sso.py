"""Single sign-on: users the identity provider manages, their role from its groups, and the
trusted-proxy mode (an authenticating proxy such as oauth2-proxy sets user and groups headers).

Trust comes from the connection, never from a header: only a request whose direct peer address
(``REMOTE_ADDR``; the ASGI ``client`` of a websocket) is in ``CTRLSCOPE_TRUSTED_PROXIES`` may sign
someone in with the headers. From anywhere else the headers are ignored, and a request that carries
them anyway is refused with 403, so a proxy that was routed around shows up at once instead of
silently turning everyone into an anonymous visitor.

The role is evaluated on every request: a user whose groups no longer map to a role loses it on the
next request (operator to viewer, or viewer to no access at all, which is a 403 saying why).

Django's ``RemoteUserBackend`` is the backend (so Django's own remote-user logout logic recognises
these sessions), but not its ``RemoteUserMiddleware``: that middleware cannot answer a request
itself (a 403 here) and trusts its header from any peer.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.backends import RemoteUserBackend
from django.contrib.auth.models import AnonymousUser, Group, User
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.decorators import sync_and_async_middleware

from dashboard.access import OPERATORS_GROUP
from dashboard.models import ExternalIdentity

log = logging.getLogger(__name__)

OPERATOR = "operator"
VIEWER = "viewer"
PROXY_BACKEND_PATH = "dashboard.sso.TrustedProxyBackend"


# -- roles ---------------------------------------------------------------------------------------

def role_for(groups: Iterable[str]) -> str | None:
    """The role the groups give: operator, viewer, or None (no access)."""
    groups = set(groups)
    if groups & settings.CTRLSCOPE_OPERATOR_GROUPS:
        return OPERATOR
    if "*" in settings.CTRLSCOPE_VIEWER_GROUPS or groups & settings.CTRLSCOPE_VIEWER_GROUPS:
        return VIEWER
    return None


def no_role_message(username: str, groups: list[str]) -> str:
    shown = ", ".join(groups) if groups else "none"
    return (f"You are signed in as {username!r}, but none of your groups ({shown}) gives access to this "
            "dashboard. An administrator maps groups to roles with CTRLSCOPE_VIEWER_GROUPS and "
            "CTRLSCOPE_OPERATOR_GROUPS.")


def split_groups(raw: str | Iterable[Any] | None) -> list[str]:
    """Groups from a comma-separated header (oauth2-proxy's X-Forwarded-Groups) or a claim (a list,
    or one string)."""
    if raw is None:
        return []
    items = raw.split(",") if isinstance(raw, str) else [str(g) for g in raw]
    return sorted({g.strip() for g in items if g.strip()})


def sign_in_external(source: str, subject: str, username: str, email: str | None,
                     groups: list[str]) -> tuple[User | None, str | None]:
    """The user ``source``/``subject`` is, created or brought up to date with the role their groups
    give; ``(None, why)`` when they get no access (their user, if any, is then deactivated)."""
    try:
        return _sign_in_external(source, subject, username, email, groups)
    except IntegrityError:
        # Two first requests of the same new user at once: the other one created it; use that.
        return _sign_in_external(source, subject, username, email, groups)


def _sign_in_external(source: str, subject: str, username: str, email: str | None,
                      groups: list[str]) -> tuple[User | None, str | None]:
    role = role_for(groups)
    username = username.strip()[:150]
    with transaction.atomic():
        ident = (ExternalIdentity.objects.select_for_update().select_related("user")
                 .filter(source=source, subject=subject).first())
        if ident is None:
            if role is None:
                return None, no_role_message(username, groups)
            if not username:
                return None, "The identity provider gave no user name."
            if User.objects.filter(username=username).exists():
                # Never take over a local account (a local superuser "admin" must not become whoever
                # the identity provider calls "admin").
                return None, (f"A local account named {username!r} already exists; single sign-on does not "
                              "take over local accounts. An administrator can rename or delete it.")
            user = User(username=username, email=email or "")
            user.set_unusable_password()
            user.save()
            ident = ExternalIdentity.objects.create(user=user, source=source, subject=subject, groups=groups,
                                                    role=role or "")
            log.info("single sign-on: created %s user %r (%s)", source, username, role)
        user = ident.user
        changed = []
        if email is not None and user.email != email:
            user.email, changed = email, [*changed, "email"]
        active = role is not None
        if user.is_active != active:
            user.is_active, changed = active, [*changed, "is_active"]
        # The identity provider decides: an externally managed user is never a superuser or staff,
        # whose powers would outlive a removed group.
        if user.is_superuser or user.is_staff:
            user.is_superuser = user.is_staff = False
            changed += ["is_superuser", "is_staff"]
        if changed:
            user.save(update_fields=changed)
        is_op = user.groups.filter(name=OPERATORS_GROUP).exists()
        if role == OPERATOR and not is_op:
            user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
        elif role != OPERATOR and is_op:
            user.groups.remove(*Group.objects.filter(name=OPERATORS_GROUP))
        if ident.groups != groups or ident.role != (role or ""):
            log.info("single sign-on: %s user %r is now %s (groups %s)", source, user.username, role or "without access",
                     ", ".join(groups) or "none")
            ident.groups, ident.role = groups, role or ""
            ident.save(update_fields=["groups", "role", "updated"])
    if role is None:
        return None, no_role_message(user.username, groups)
    return user, None


# -- trusted proxy -------------------------------------------------------------------------------

def peer_is_trusted(address: str | None) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if getattr(ip, "ipv4_mapped", None):
        ip = ip.ipv4_mapped
    return any(ip in net for net in settings.CTRLSCOPE_TRUSTED_PROXIES)


def _meta_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


def proxy_headers() -> tuple[str, str, str]:
    return (settings.CTRLSCOPE_PROXY_USER_HEADER, settings.CTRLSCOPE_PROXY_GROUPS_HEADER,
            settings.CTRLSCOPE_PROXY_EMAIL_HEADER)


def untrusted_message(peer: str | None, present: list[str]) -> str:
    return (f"This request carries {', '.join(present)} but came from {peer or 'an unknown address'}, which is "
            "not a trusted proxy (CTRLSCOPE_TRUSTED_PROXIES): the headers were ignored and the request refused. "
            "Reach the dashboard through its authenticating proxy.")


class TrustedProxyBackend(RemoteUserBackend):
    """Signs in the user the trusted proxy names, with the role its groups give. Only
    TrustedProxyMiddleware and the websocket middleware call it, after checking the peer."""

    create_unknown_user = True

    def authenticate(self, request: HttpRequest | None, remote_user: str | None = None, *,
                     proxy_groups: list[str] | None = None, proxy_email: str | None = None) -> User | None:
        if not remote_user:
            return None
        user, problem = sign_in_external(ExternalIdentity.PROXY, remote_user, remote_user, proxy_email,
                                         proxy_groups or [])
        if request is not None:
            request.ctrlscope_sso_denied = problem
        return user


def _forbidden(request: HttpRequest, message: str) -> HttpResponse:
    body = render_to_string("registration/sso_denied.html", {"message": message}, request=request)
    return HttpResponse(body, status=403)


def _session_backend(session: Any) -> str:
    try:
        return session.get(auth.BACKEND_SESSION_KEY, "") if session is not None else ""
    except Exception:  # an unreadable session is no proxy session
        return ""


def _proxy_request(request: HttpRequest) -> HttpResponse | None:
    """Sets ``request.user`` from the proxy's headers, or answers the request (403) itself."""
    headers = proxy_headers()
    keys = [_meta_key(h) for h in headers]
    present = [h for h, k in zip(headers, keys, strict=True) if k in request.META]
    peer = request.META.get("REMOTE_ADDR")
    if not peer_is_trusted(peer):
        for key in keys:
            request.META.pop(key, None)
        if present:
            log.warning("refused a request with %s from untrusted %s", ", ".join(present), peer)
            return _forbidden(request, untrusted_message(peer, present))
        # A session the proxy signed in is valid only through the proxy.
        if _session_backend(request.session) == PROXY_BACKEND_PATH:
            auth.logout(request)
        return None
    username = request.META.get(keys[0], "").strip()
    if not username:
        # The proxy let this through unauthenticated (e.g. a skipped path): no proxy session.
        if _session_backend(request.session) == PROXY_BACKEND_PATH:
            auth.logout(request)
        return None
    if "," in username:
        # Two user headers (joined by Django): the proxy did not replace the client's own.
        log.warning("refused a request from proxy %s with several %s values", peer, headers[0])
        return _forbidden(request, f"This request carries several {headers[0]} values; the proxy must replace "
                                   "the client's own.")
    email = request.META.get(keys[2], "").strip() or None
    user = TrustedProxyBackend().authenticate(request, username, proxy_groups=split_groups(request.META.get(keys[1])),
                                              proxy_email=email)
    if user is None:
        if request.user.is_authenticated:
            auth.logout(request)
        return _forbidden(request, request.ctrlscope_sso_denied or "Single sign-on refused this user.")
    user.backend = PROXY_BACKEND_PATH
    current = request.user
    if not (current.is_authenticated and current.pk == user.pk
            and _session_backend(request.session) == PROXY_BACKEND_PATH):
        auth.login(request, user, backend=PROXY_BACKEND_PATH)  # a new session: another user's is flushed
    request.user = user
    return None


@sync_and_async_middleware
def TrustedProxyMiddleware(get_response):
    """After AuthenticationMiddleware: the trusted proxy's user, with the role their groups give."""
    if iscoroutinefunction(get_response):
        async def middleware(request: HttpRequest) -> HttpResponse:
            refused = await sync_to_async(_proxy_request, thread_sensitive=True)(request)
            return refused if refused is not None else await get_response(request)
    else:
        def middleware(request: HttpRequest) -> HttpResponse:
            refused = _proxy_request(request)
            return refused if refused is not None else get_response(request)
    return middleware


# -- websockets ----------------------------------------------------------------------------------

async def _refuse_handshake(receive: Any, send: Any) -> None:
    """Close before accepting: the client sees HTTP 403 for the handshake."""
    while True:
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": 1008})
            return
        if message["type"] == "websocket.disconnect":
            return


class TrustedProxyWebsocketMiddleware:
    """The same rules for the telemetry websocket (inside channels' AuthMiddlewareStack, so the
    session's user is known): the proxy's user with their role from a trusted peer, a refused
    handshake (403) for proxy headers from anywhere else or for a user without a role."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket" or not settings.CTRLSCOPE_TRUSTED_PROXIES:
            return await self.inner(scope, receive, send)
        wanted = {h.lower(): h for h in proxy_headers()}
        found: dict[str, str] = {}
        repeated = False
        for name, value in scope.get("headers", []):
            key = name.decode("latin-1").lower()
            if key in wanted:
                repeated = repeated or wanted[key] in found
                found[wanted[key]] = value.decode("latin-1")
        peer = (scope.get("client") or [None])[0]
        user_header, groups_header, email_header = proxy_headers()
        username = found.get(user_header, "").strip()
        if not peer_is_trusted(peer) or not username:
            if found and not peer_is_trusted(peer):
                log.warning("refused a websocket with %s from untrusted %s", ", ".join(found), peer)
                return await _refuse_handshake(receive, send)
            if await database_sync_to_async(_session_backend)(scope.get("session")) == PROXY_BACKEND_PATH:
                scope = dict(scope, user=AnonymousUser())  # a proxy session counts only through the proxy
            return await self.inner(scope, receive, send)
        if repeated:
            log.warning("refused a websocket from proxy %s with a proxy header given twice", peer)
            return await _refuse_handshake(receive, send)
        user = await database_sync_to_async(TrustedProxyBackend().authenticate)(
            None, username, proxy_groups=split_groups(found.get(groups_header)),
            proxy_email=found.get(email_header, "").strip() or None)
        if user is None:
            log.info("refused a websocket for proxy user %r: no role", username)
            return await _refuse_handshake(receive, send)
        return await self.inner(dict(scope, user=user), receive, send)

"""API authentication: operator keys (X-Admin-Key), user bearer tokens, staff sessions; and the
scope permission that operator endpoints use."""

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from ops.models import ApiKey, UserToken
from ops.services import audit_log_write_limited, secret_hash
from ops.throttling import anon_hit_or_raise


class OperatorPrincipal:
    """request.user for a call made with an API key: authenticated, not a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_active = True

    def __init__(self, key: ApiKey):
        self.key = key
        self.pk = None
        self.username = f"api_key:{key.name}"

    def __str__(self):
        return self.username


def _touch(row) -> None:
    # last_used_at at most once a minute: no write per request on a hot key.
    now = timezone.now()
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
        type(row).objects.filter(pk=row.pk).update(last_used_at=now)


def _rejected(request, action: str, raw: str) -> None:
    """Audit a rejected credential (bounded under a flood) and spend the client IP's anonymous
    budget: past it the answer is 429, so keys cannot be guessed at full speed."""
    audit_log_write_limited(
        action=action,
        request=request._request,  # the Django request: its .user does not re-authenticate
        actor="anonymous",
        result="rejected",
        metadata={"prefix": raw.strip()[:10]},  # what a key's prefix column shows, never more
    )
    anon_hit_or_raise(request._request)


class AdminKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        raw = request.headers.get("X-Admin-Key")
        if not raw:
            return None
        key = ApiKey.objects.filter(
            key_hash=secret_hash(raw.strip()), revoked_at__isnull=True
        ).first()
        if key is None:
            _rejected(request, "auth.api_key_rejected", raw)
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        _touch(key)
        return OperatorPrincipal(key), key

    def authenticate_header(self, request):
        return 'X-Admin-Key realm="vitalflow"'


class BearerTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return None
        raw = header[len("Bearer ") :].strip()
        token = (
            UserToken.objects.select_related("user")
            .filter(token_hash=secret_hash(raw), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if token is None:
            _rejected(request, "auth.token_rejected", raw)
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        _touch(token)
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="vitalflow"'


def has_scope(request, scope: str) -> bool:
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return scope in auth.scopes or "*" in auth.scopes
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated and user.is_staff)


def scope_required(scope: str) -> type[permissions.BasePermission]:
    """Permission class: an API key with `scope`, or a staff session. 401 without credentials."""

    class ScopeRequired(permissions.BasePermission):
        message = f"This needs the {scope!r} scope or a staff session."

        def has_permission(self, request, view):
            if not (request.user and request.user.is_authenticated):
                raise exceptions.NotAuthenticated("Send X-Admin-Key or sign in as staff.")
            return has_scope(request, scope)

    ScopeRequired.__name__ = f"ScopeRequired[{scope}]"
    return ScopeRequired


def credentials_required() -> type[permissions.BasePermission]:
    """Permission class: any credentials (401 without); the service behind the view decides
    what they may do and audits its refusals (graph answers: graphs.answers)."""

    class CredentialsRequired(permissions.BasePermission):
        def has_permission(self, request, view):
            if not (request.user and request.user.is_authenticated):
                raise exceptions.NotAuthenticated("Send X-Admin-Key or sign in as staff.")
            return True

    return CredentialsRequired


class IsEndUser(permissions.BasePermission):
    """A real user (bearer token or session); an operator key is not a user."""

    message = "This endpoint needs a user's bearer token."

    def has_permission(self, request, view):
        user = request.user
        if not (user and user.is_authenticated):
            raise exceptions.NotAuthenticated("Send Authorization: Bearer <token>.")
        return not isinstance(user, OperatorPrincipal)

"""Writes for ops: API keys, user tokens and audit rows."""

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from ops.models import ApiKey, AuditLog, UserToken
from ops.request_id import get_request_id

SYSTEM_ACTOR = "system"


def secret_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_key_create(*, name: str, scopes: list[str]) -> tuple[ApiKey, str]:
    """Returns the row and the raw key; the raw key is never stored and cannot be shown again."""
    raw = "vfk_" + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        name=name, prefix=raw[:10], key_hash=secret_hash(raw), scopes=sorted(set(scopes))
    )
    return key, raw


def api_key_revoke(*, key: ApiKey, actor: str) -> None:
    with transaction.atomic():  # the revocation and its audit row commit together
        if key.revoked_at is None:
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
        audit_log_write(actor=actor, action="api_key.revoke", resource=f"api_key:{key.pk}")


def user_token_create(*, user, name: str = "default") -> tuple[UserToken, str]:
    raw = "vfu_" + secrets.token_urlsafe(32)
    token = UserToken.objects.create(
        user=user, name=name, prefix=raw[:10], token_hash=secret_hash(raw)
    )
    return token, raw


def user_get_or_create(*, username: str, create: bool):
    User = get_user_model()
    if create:
        user, _ = User.objects.get_or_create(username=username)
        return user
    return User.objects.get(username=username)


def actor_for(request) -> str:
    """Who did it, as written in audit rows: the API key, the staff user, or the system."""
    if request is None:
        return SYSTEM_ACTOR
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return f"api_key:{auth.pk}:{auth.name}"
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "username", None):
        return f"user:{user.username}"
    return SYSTEM_ACTOR


def _client_ip(request) -> str | None:
    if request is None:
        return None
    from ops.throttling import client_ip_or_none

    return client_ip_or_none(request)


def audit_log_write(
    *,
    action: str,
    resource: str = "",
    result: str = "ok",
    request=None,
    actor: str | None = None,
    metadata: dict | None = None,
    idempotency_key: str = "",
    deduplicated: bool = False,
    subject=None,
) -> AuditLog:
    """Record an operator mutation. Pass the request when there is one (actor, ip, agent, id);
    `subject`: the user (or user id) whose data it concerns."""
    return AuditLog.objects.create(
        subject_id=subject if subject is None or isinstance(subject, int) else subject.pk,
        actor=actor or actor_for(request),
        action=action,
        resource=resource[:300],
        result=result[:50],
        ip=_client_ip(request),
        user_agent=(request.META.get("HTTP_USER_AGENT", "")[:300] if request is not None else ""),
        request_id=get_request_id() if get_request_id() != "-" else "",
        idempotency_key=idempotency_key[:255],
        deduplicated=deduplicated,
        metadata=metadata or {},
    )


# Audit rows written for unauthenticated failures (bad logins, rejected keys), per action and
# client IP and per action overall, in each 10-minute window: a flood writes a bounded number of
# rows (plus one saying the rest were suppressed), not one per request. Counted by the throttles'
# atomic counters (ops.throttling.window_count), so concurrent workers cannot overshoot.
AUDIT_FLOOD_WINDOW = 600
AUDIT_FLOOD_PER_IP = 20
AUDIT_FLOOD_PER_ACTION = 200


def audit_log_write_limited(*, action: str, request, actor: str, **fields) -> AuditLog | None:
    """audit_log_write for failures an attacker can repeat at will; None when suppressed."""
    from ops.throttling import window_count

    ip = _client_ip(request) or "unknown"
    per_ip, _ = window_count(f"audit:{action}:{ip}", AUDIT_FLOOD_WINDOW)
    overall, _ = window_count(f"audit:{action}", AUDIT_FLOOD_WINDOW)
    if per_ip is None or overall is None:
        return None  # no counter, no bound: write nothing rather than fill the table
    if per_ip > AUDIT_FLOOD_PER_IP or overall > AUDIT_FLOOD_PER_ACTION:
        if per_ip == AUDIT_FLOOD_PER_IP + 1 or overall == AUDIT_FLOOD_PER_ACTION + 1:
            return audit_log_write(
                action=f"{action}.suppressed",
                result="suppressed",
                request=request,
                actor=actor,
                metadata={"window_seconds": AUDIT_FLOOD_WINDOW, "ip": ip},
            )
        return None
    return audit_log_write(action=action, request=request, actor=actor, **fields)


def login_failed_audit(sender, credentials: dict, request=None, **kwargs) -> None:
    """user_login_failed receiver: one audit row per failed login (bounded per IP)."""
    if request is None:
        return
    username = str(credentials.get("username", ""))[:150]
    audit_log_write_limited(
        action="auth.login_failed",
        request=request,
        actor="anonymous",
        resource=f"user:{username}",
        result="failed",
    )

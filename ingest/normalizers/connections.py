"""Connection events: auth (connect + 90-day backfill), user_reauth (the connection moves to the
new Terra id), deauth / access_revoked (deactivate), auth_cancelled (skipped)."""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ingest.models import RawEvent, TerraConnection
from ingest.normalizers.common import dig
from ingest.normalizers.rows import upsert_keep_non_null
from ingest.normalizers.users import user_for_reference
from ingest.registry import NormalizeResult, register
from ingest.replay import raw_events_requeue_for_terra_user
from ingest.terra.client import BACKFILL_TYPES, get_terra_client
from ingest.terra.envelope import ID_MAX
from ingest.traces import trace_write

log = logging.getLogger(__name__)

BACKFILL_DAYS = 90


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _too_long(*identifiers: str) -> NormalizeResult | None:
    """An identifier longer than its column can never be stored: acknowledged, with the reason."""
    if any(len(value) > ID_MAX for value in identifiers):
        return NormalizeResult(ok=True, skipped="identifier_too_long")
    return None


def backfill_request(*, terra_user_id: str, user_id: int | None, days: int = BACKFILL_DAYS) -> int:
    """Ask Terra to re-send `days` days of every backfill type by webhook. Each failure is
    logged and traced, never raised: the auth itself already succeeded. Returns how many
    requests Terra accepted."""
    end = timezone.now().date()
    start = end - timedelta(days=days)
    accepted = 0
    for data_type in BACKFILL_TYPES:
        try:
            get_terra_client().request_backfill(
                terra_user_id=terra_user_id, data_type=data_type, start_date=start, end_date=end
            )
            accepted += 1
        except Exception as exc:
            log.warning("backfill of %s for %s failed: %s", data_type, terra_user_id, exc)
            trace_write(
                "backfill_failed",
                user_id=user_id,
                level="warning",
                data={"terra_user_id": terra_user_id, "type": data_type, "error": str(exc)[:300]},
            )
    return accepted


def _connect(*, terra_user_id: str, user, info: dict) -> None:
    """Upsert the connection and make sure it is active; then release rows that waited for it
    and schedule the backfill once this transaction commits."""
    values = {
        "user_id": user.pk,
        "provider": _text(info.get("provider")),
        "reference_id": _text(info.get("reference_id")),
        "scopes": _text(info.get("scopes")),
    }
    # Fields the payload lacks keep what we hold (and start empty on a new connection).
    upsert_keep_non_null(
        TerraConnection,
        key={"terra_user_id": terra_user_id},
        values=values,
        keep_existing={name for name, value in values.items() if value == ""},
    )
    # deactivated_at must be cleared, which a keep-non-null upsert cannot do by design.
    TerraConnection.objects.filter(
        terra_user_id=terra_user_id, deactivated_at__isnull=False
    ).update(deactivated_at=None, updated_at=timezone.now())
    # Rows parked for want of this connection go again at once (the drain leaves them alone).
    raw_events_requeue_for_terra_user(terra_user_id=terra_user_id)
    transaction.on_commit(lambda: backfill_request(terra_user_id=terra_user_id, user_id=user.pk))


@register("auth", "auth_success")
def normalize_auth(raw_event: RawEvent) -> NormalizeResult:
    payload = raw_event.payload
    status = _text(payload.get("status"))
    if status != "success":
        return NormalizeResult(ok=True, skipped=f"auth_{status or 'no_status'}")
    info = payload.get("user") if isinstance(payload.get("user"), dict) else {}
    terra_user_id = _text(info.get("user_id"))
    reference_id = _text(info.get("reference_id")) or _text(payload.get("reference_id"))
    if not terra_user_id:
        return NormalizeResult(ok=False, error="auth_without_user_id")
    if too_long := _too_long(terra_user_id, reference_id):
        return too_long
    if reference_id:
        user = user_for_reference(reference_id)
    else:
        existing = TerraConnection.objects.filter(terra_user_id=terra_user_id).first()
        if existing is None:
            return NormalizeResult(ok=False, error="auth_without_reference_id")
        user = existing.user
    _connect(terra_user_id=terra_user_id, user=user, info=info)
    raw_event.user = user
    return NormalizeResult(ok=True, rows=1)


@register("auth_cancelled")
def normalize_auth_cancelled(raw_event: RawEvent) -> NormalizeResult:
    return NormalizeResult(ok=True, skipped="auth_cancelled")


@register("user_reauth")
def normalize_user_reauth(raw_event: RawEvent) -> NormalizeResult:
    """Terra deleted old_user and issued new_user for the same person: the connection (and so
    every later delivery) moves to the new id."""
    payload = raw_event.payload
    new, old = payload.get("new_user"), payload.get("old_user")
    new_id, old_id = _text(dig(new, "user_id")), _text(dig(old, "user_id"))
    if not new_id:
        return NormalizeResult(ok=False, error="user_reauth_without_new_user")
    reference_id = _text(dig(new, "reference_id")) or _text(dig(old, "reference_id"))
    if too_long := _too_long(new_id, old_id, reference_id):
        return too_long
    old_connection = (
        TerraConnection.objects.filter(terra_user_id=old_id).first() if old_id else None
    )
    if reference_id:
        user = user_for_reference(reference_id)
    elif old_connection is not None:
        user = old_connection.user
    else:
        return NormalizeResult(ok=False, error="no_connection_for_terra_user")
    if old_connection is not None:
        if TerraConnection.objects.filter(terra_user_id=new_id).exists():
            # The new id's auth arrived first: keep that row, retire the old one.
            old_connection.deactivated_at = timezone.now()
            old_connection.save(update_fields=["deactivated_at", "updated_at"])
        else:
            old_connection.terra_user_id = new_id
            old_connection.save(update_fields=["terra_user_id", "updated_at"])
    _connect(terra_user_id=new_id, user=user, info=new if isinstance(new, dict) else {})
    raw_event.user = user
    return NormalizeResult(ok=True, rows=1)


@register("deauth", "access_revoked")
def normalize_deauth(raw_event: RawEvent) -> NormalizeResult:
    terra_user_id = raw_event.terra_user_id
    connection = TerraConnection.objects.filter(terra_user_id=terra_user_id).first()
    if connection is None:
        return NormalizeResult(ok=True, rows=0)
    raw_event.user_id = connection.user_id
    changed = TerraConnection.objects.filter(pk=connection.pk, deactivated_at__isnull=True).update(
        deactivated_at=timezone.now(), updated_at=timezone.now()
    )
    return NormalizeResult(ok=True, rows=changed)

"""Connections from our side: the Terra widget link, reconciling our connections against Terra's
subscription list, and backfill requests (operator "backfill N days", the daily reconcile)."""

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from ingest.models import TerraConnection
from ingest.replay import raw_events_requeue_for_terra_user
from ingest.terra.client import BACKFILL_TYPES, TerraError, TerraNetworkError, get_terra_client
from ingest.traces import trace_write

log = logging.getLogger(__name__)

RECONCILE_DAYS = 7


def connection_widget_session(*, user, provider: str | None = None) -> dict:
    """Terra's hosted widget URL; reference_id = username is how the auth webhook finds the user."""
    answer = get_terra_client().generate_widget_session(
        reference_id=user.username, providers=[provider] if provider else None
    )
    return {"url": answer.get("url"), "session_id": answer.get("session_id")}


@dataclass
class ReconcileResult:
    created: list[str] = field(default_factory=list)
    reactivated: list[str] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    error: str | None = None
    skipped: bool = False  # reconciled lately (ME_RECONCILE_SECONDS): Terra not asked

    def as_dict(self) -> dict:
        return {
            "created": self.created,
            "reactivated": self.reactivated,
            "deactivated": self.deactivated,
            "error": self.error,
            "skipped": self.skipped,
        }


def connections_reconcile_spaced(*, user) -> ReconcileResult:
    """connections_reconcile at most once per ME_RECONCILE_SECONDS per user (`skipped` when
    done lately). GET /v1/me calls it: a client polling /v1/me must not become one Terra
    call per request. The mark lives in the shared cache (cache.add is atomic), so every web
    process agrees; a cache that does not answer means reconciling."""
    seconds = getattr(settings, "ME_RECONCILE_SECONDS", 300)
    if seconds > 0:
        try:
            first = cache.add(f"me-reconcile:{user.pk}", 1, timeout=seconds)
        except Exception:
            log.warning("reconcile spacing: cache unavailable", exc_info=True)
            first = True
        if not first:
            return ReconcileResult(skipped=True)
    return connections_reconcile(user=user)


def connections_reconcile(*, user) -> ReconcileResult:
    """Make `user`'s connections match Terra's subscription list: ones Terra no longer lists
    (or lists as inactive) are deactivated; ones it lists for this reference_id that we lack are
    created. Terra being down is reported in the result, never raised: callers still answer
    from what we have."""
    result = ReconcileResult()
    try:
        listed = get_terra_client().list_subscriptions()
    except (TerraError, TerraNetworkError) as exc:
        log.warning("subscription reconcile for %s failed: %s", user.username, exc)
        result.error = str(exc)[:300]
        return result
    ours = {c.terra_user_id: c for c in TerraConnection.objects.filter(user=user)}
    theirs = {
        str(item["user_id"]): item
        for item in listed
        if isinstance(item, dict)
        and item.get("user_id")
        and (str(item["user_id"]) in ours or item.get("reference_id") == user.username)
    }
    now = timezone.now()
    with transaction.atomic():
        for terra_user_id, conn in ours.items():
            item = theirs.get(terra_user_id)
            listed_active = item is not None and item.get("active") is not False
            if conn.is_active and not listed_active:
                conn.deactivated_at = now
                conn.save(update_fields=["deactivated_at", "updated_at"])
                result.deactivated.append(terra_user_id)
            elif not conn.is_active and listed_active:
                conn.deactivated_at = None
                conn.save(update_fields=["deactivated_at", "updated_at"])
                result.reactivated.append(terra_user_id)
        for terra_user_id, item in theirs.items():
            if terra_user_id in ours or item.get("active") is False:
                continue
            # Another of our users may hold this Terra id (a re-auth we missed): leave it alone.
            if TerraConnection.objects.filter(terra_user_id=terra_user_id).exists():
                continue
            TerraConnection.objects.create(
                user=user,
                terra_user_id=terra_user_id,
                provider=str(item.get("provider") or ""),
                reference_id=user.username,
                scopes=str(item.get("scopes") or ""),
            )
            result.created.append(terra_user_id)
    if result.created or result.reactivated:
        _release_parked(terra_user_ids=result.created + result.reactivated)
    if result.created or result.reactivated or result.deactivated:
        trace_write("connections_reconciled", user_id=user.pk, data=result.as_dict())
    return result


def _release_parked(*, terra_user_ids: list[str]) -> int:
    """Rows parked because their Terra user had no connection can resolve now."""
    return sum(raw_events_requeue_for_terra_user(terra_user_id=t) for t in terra_user_ids)


def connection_backfill(
    *, connection: TerraConnection, days: int, types=BACKFILL_TYPES
) -> list[dict]:
    """Ask Terra to re-send the last `days` days of each type by webhook. One type failing is
    logged and recorded; the others still go out."""
    end = timezone.now().date()
    start = end - timedelta(days=days)
    outcomes = []
    for data_type in types:
        entry = {
            "terra_user_id": connection.terra_user_id,
            "provider": connection.provider,
            "type": data_type,
            "start_date": start.isoformat(),
            "end_date": end.isoformat(),
        }
        began = time.perf_counter()
        try:
            answer = get_terra_client().request_backfill(
                terra_user_id=connection.terra_user_id,
                data_type=data_type,
                start_date=start,
                end_date=end,
                to_webhook=True,
            )
            entry.update(status="requested", reference=_reference(answer))
        except (TerraError, TerraNetworkError) as exc:
            log.warning("backfill %s for %s failed: %s", data_type, connection.terra_user_id, exc)
            entry.update(status="failed", error=str(exc)[:300])
        trace_write(
            "backfill_requested" if entry["status"] == "requested" else "backfill_failed",
            user_id=connection.user_id,
            level="info" if entry["status"] == "requested" else "warning",
            duration_ms=round((time.perf_counter() - began) * 1000, 2),
            data=entry,
        )
        outcomes.append(entry)
    return outcomes


def _reference(answer) -> str | None:
    # Terra answers a to_webhook request with a reference naming the coming chunks.
    return answer.get("reference") if isinstance(answer, dict) else None


def connections_backfill_recent(*, days: int = RECONCILE_DAYS, user=None) -> dict:
    """The daily reconcile: every active connection (of `user`, or all), last `days` days.
    One connection failing (even with an unexpected exception) is logged; the others go on."""
    began = time.perf_counter()
    qs = TerraConnection.objects.filter(deactivated_at__isnull=True).select_related("user")
    if user is not None:
        qs = qs.filter(user=user)
    summary = {"connections": 0, "requested": 0, "failed": 0, "days": days}
    for connection in qs.order_by("id").iterator():
        summary["connections"] += 1
        try:
            outcomes = connection_backfill(connection=connection, days=days)
        except Exception:
            log.exception("reconcile of connection %s failed", connection.terra_user_id)
            summary["failed"] += len(BACKFILL_TYPES)
            continue
        summary["requested"] += sum(1 for o in outcomes if o["status"] == "requested")
        summary["failed"] += sum(1 for o in outcomes if o["status"] != "requested")
    trace_write(
        "reconcile_run",
        level="info" if not summary["failed"] else "warning",
        duration_ms=round((time.perf_counter() - began) * 1000, 2),
        data=summary,
    )
    return summary


# What terra_user_deauthenticate answers: Terra revoked its access now, or it no longer knew the
# user (revoked before: nothing left to do).
DEAUTHENTICATED, NOT_AT_TERRA = "deauthenticated", "not_found"


class TerraDeauthRetryable(Exception):
    """Terra could not be reached, or answered 429 or 5xx: the call may succeed later."""


def terra_user_deauthenticate(*, terra_user_id: str) -> str:
    """Revoke Terra's access to one Terra user of a wiped user (DELETE
    /v2/auth/deauthenticateUser). This is the step a durable workflow with retries runs for each
    of the wiped user's connections: raises TerraDeauthRetryable for what may succeed later, and
    TerraError for any other refusal (retrying cannot change it)."""
    try:
        get_terra_client().deauthenticate_user(terra_user_id=terra_user_id)
    except TerraNetworkError as exc:
        raise TerraDeauthRetryable(str(exc)[:300]) from None
    except TerraError as exc:
        if exc.status == 404:
            return NOT_AT_TERRA
        if exc.status == 429 or exc.status >= 500:
            raise TerraDeauthRetryable(str(exc)[:300]) from None
        raise
    return DEAUTHENTICATED

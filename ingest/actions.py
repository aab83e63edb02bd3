"""Operator actions on ingest, one function per state change: each calls the service, writes the
audit row (in the change's transaction where there is one) and says what it did. The console,
the operator API and the management commands all come through here; services never audit."""

import logging

from django.db import transaction
from django.utils import timezone

from ingest import bulk as raw_bulk
from ingest import connections, drain, replay, wipe
from ingest.models import RawEvent, RawEventState, TerraConnection
from ingest.traces import trace_write
from ingest.workflows import terra_deauthenticate_start
from ops import bulk
from ops.models import BulkJob
from ops.services import SYSTEM_ACTOR, actor_for, audit_log_write

log = logging.getLogger(__name__)

# Rows an operator may acknowledge by hand: anything not finished.
SKIPPABLE_STATES = (
    RawEventState.PENDING,
    RawEventState.PARKED,
    RawEventState.RETRYING,
    RawEventState.DEAD,
)


def do_raw_events_replay(*, ids: list[int], request=None, actor: str | None = None) -> int:
    """Re-run rows whatever their state; returns how many exist."""
    ids = sorted({int(i) for i in ids})
    with transaction.atomic():
        found = replay.raw_events_replay(ids=ids)
        audit_log_write(
            action="raw_events.replay",
            resource=f"raw_events:{','.join(map(str, found[:50]))}",
            request=request,
            actor=actor,
            metadata={"requested": len(ids), "replayed": len(found), "ids": found[:500]},
        )
    return len(found)


def do_raw_events_drain(
    *,
    limit: int = 50,
    include_skipped: bool = False,
    include_no_connection: bool = False,
    inline: bool = False,
    request=None,
    actor: str | None = None,
) -> drain.DrainResult:
    """An operator's drain (API, console, command): the drain, its audit row and a drain_run
    trace the dashboard reads as "last drain"."""
    result = drain.raw_events_drain(
        limit=limit,
        include_skipped=include_skipped,
        include_no_connection=include_no_connection,
        inline=inline,
    )
    summary = result.as_dict()
    audit_log_write(
        action="raw_events.drain",
        resource="raw_events",
        request=request,
        actor=actor or (None if request is not None else SYSTEM_ACTOR),
        metadata={
            "limit": result.limit,
            "include_skipped": include_skipped,
            "include_no_connection": include_no_connection,
            **summary,
            "ids": result.ids[:500],
        },
    )
    trace_write(
        "drain_run", data={k: v for k, v in summary.items() if k != "ids"} | {"source": "operator"}
    )
    return result


def do_raw_events_mark_skipped(
    *, ids: list[int], reason: str, request=None, actor: str | None = None
) -> int:
    """Acknowledge unfinished rows without storing them: state skipped, process_error
    `skipped:manual:<reason>`. Finished rows are left as they are; returns how many changed."""
    reason = " ".join(reason.split())[:200] or "operator"
    now = timezone.now()
    with transaction.atomic():
        # Compare-and-set on state: a consumer finishing a row meanwhile wins.
        changed_ids = list(
            RawEvent.objects.filter(pk__in=ids, state__in=SKIPPABLE_STATES).values_list(
                "id", flat=True
            )
        )
        changed = RawEvent.objects.filter(pk__in=changed_ids, state__in=SKIPPABLE_STATES).update(
            state=RawEventState.SKIPPED,
            processed_at=now,
            process_error=f"skipped:manual:{reason}",
            process_traceback=None,
            next_attempt_at=None,
        )
        audit_log_write(
            action="raw_events.mark_skipped",
            resource="raw_events:" + ",".join(str(i) for i in changed_ids[:50]),
            request=request,
            actor=actor,
            metadata={"requested": len(ids), "changed": changed, "reason": reason},
        )
    for raw_event_id in changed_ids:
        trace_write("skipped", raw_event_id=raw_event_id, data={"manual": True, "reason": reason})
    return changed


def do_user_wipe(*, user, request=None, actor: str | None = None) -> dict[str, int]:
    """Delete all of `user`'s data and the user; returns what went, per source. The audit row
    names the user by id and holds counts, never values. In the same transaction, a durable
    `terra-deauthenticate` instance is created for the user's Terra connections
    (ingest/workflows.py): it deauthenticates each at Terra, retrying through any outage."""
    user_pk, username = user.pk, user.get_username()
    terra_user_ids = list(
        TerraConnection.objects.filter(user=user).values_list("terra_user_id", flat=True)
    )
    actor = actor or actor_for(request)
    with transaction.atomic():
        counts = wipe.user_wipe(user=user)
        if terra_user_ids:
            # A user wiping themselves: the instance must not keep their name as its actor.
            by = f"user#{user_pk}" if actor == f"user:{username}" else actor
            terra_deauthenticate_start(terra_user_ids=terra_user_ids, user_pk=user_pk, actor=by)
        counts["terra_deauthentications"] = len(set(terra_user_ids))
        audit_log_write(
            action="user.wipe",
            resource=f"user:{user_pk}",
            request=request,
            actor=actor,
            subject=user_pk,
            metadata={"counts": counts},
        )
    return counts


def do_connection_backfill(
    *, connection: TerraConnection, days: int, request=None, actor: str | None = None
) -> list[dict]:
    """Ask Terra to re-send `days` days of one connection's data; audited with each outcome."""
    outcomes = connections.connection_backfill(connection=connection, days=days)
    failed = sum(1 for o in outcomes if o["status"] != "requested")
    audit_log_write(
        action="terra_connection.backfill",
        resource=f"terra_connection:{connection.pk}",
        result="ok" if not failed else f"partial:{failed}_failed",
        request=request,
        actor=actor,
        subject=connection.user_id,
        metadata={"days": days, "terra_user_id": connection.terra_user_id, "outcomes": outcomes},
    )
    return outcomes


def do_raw_events_bulk_replay(
    *, filters: dict, request=None, actor: str | None = None, inline: bool = False
) -> BulkJob:
    """Replay every raw event a filter matches ("every dead sleep event since 02:00") as a
    tracked job (ops.bulk): counted and stored with its ONE audit row (the filter and the
    counts, never a payload), completed by ops.bulk.bulk_job_audit_complete when the job ends. `inline`
    runs it here and now (commands, tests); else a cluster task runs it after commit."""
    filters = raw_bulk.bulk_filters_clean(filters)
    actor = actor or actor_for(request)
    with transaction.atomic():
        job = bulk.bulk_job_create(kind=raw_bulk.KIND, filters=filters, actor=actor)
        row = audit_log_write(
            action="raw_events.bulk_replay",
            resource=f"bulk_job:{job.pk}",
            result=job.state,
            request=request,
            actor=actor,
            metadata=bulk.bulk_job_outcome(job),
        )
        job.audit_id = row.pk
        job.save(update_fields=["audit_id"])
    bulk.bulk_job_start(job, inline=inline)
    job.refresh_from_db()
    return job


def _bulk_replay_chunk(ids: list[int]) -> tuple[int, int]:
    found = replay.raw_events_replay(ids=ids)
    return len(found), 0


def register_bulk_kinds() -> None:
    """Called from IngestConfig.ready, so a cluster can run the jobs."""
    bulk.register(
        bulk.BulkKind(
            name=raw_bulk.KIND,
            rows=raw_bulk.raw_events_matching,
            apply=_bulk_replay_chunk,
            finish=bulk.bulk_job_audit_complete,
        )
    )

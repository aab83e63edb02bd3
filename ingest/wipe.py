"""Wiping a user: every row of theirs in one transaction, in foreign-key-safe order, then their
stored files once the rows are gone for good (a rolled-back wipe must not have lost the files).

Order: the registered user tables (registration order is children-before-parents, see
ingest.registry), then traces, raw events, import jobs, connections, tokens, and the user."""

import logging

from django.core.files.storage import default_storage
from django.db import transaction

from ingest.models import ImportJob, TerraConnection, TraceEvent
from ingest.registry import user_tables
from ingest.selectors import user_raw_events
from ops.models import UserToken

log = logging.getLogger(__name__)
# Keeps each DELETE ... IN (...) under SQLite's bound-parameter limit.
DELETE_BATCH = 5000


def _lab_reference_ids(user) -> list[str]:
    """Lab-report deliveries carry an upload id as reference_id, not a username or a Terra user
    id; collect those ids from any registered table that stores them (labs' lab_uploads)."""
    refs: list[str] = []
    for table in user_tables():
        names = {f.name for f in table.model._meta.concrete_fields}
        if "terra_upload_id" in names:
            rows = table.model.objects.filter(user=user).values_list("terra_upload_id", "pk")
            refs += [str(v) for row in rows for v in row if v]
    return refs


def _plan(user) -> list[tuple[str, object]]:
    """(label, queryset) in delete order."""
    raw = user_raw_events(user=user)
    if refs := _lab_reference_ids(user):
        raw = raw | raw.model.objects.filter(reference_id__in=refs)
    raw_ids = raw.values("id")
    steps: list[tuple[str, object]] = [
        (t.key, t.model.objects.filter(user=user)) for t in user_tables() if t.wipe
    ]
    steps += [
        (
            "trace_events",
            TraceEvent.objects.filter(user=user)
            | TraceEvent.objects.filter(raw_event_id__in=raw_ids),
        ),
        ("raw_events", raw),
        ("import_jobs", ImportJob.objects.filter(user=user)),
        ("terra_connections", TerraConnection.objects.filter(user=user)),
        ("user_tokens", UserToken.objects.filter(user=user)),
    ]
    return steps


def user_wipe_preview(*, user) -> dict[str, int]:
    """Per-table counts a wipe would delete, and its stored files: the same keys user_wipe
    returns, so the confirmation page and the result message count the same things."""
    counts = {label: qs.count() for label, qs in _plan(user)}
    counts["users"] = 1
    counts["stored_files"] = len(_stored_files(user))
    return counts


def _stored_files(user) -> list[str]:
    keys: list[str] = []
    for table in user_tables():
        if table.wipe and table.stored_files is not None:
            for row in table.model.objects.filter(user=user).iterator():
                keys += [k for k in table.stored_files(row) if k]
    return keys


def _delete_files(keys: list[str]) -> None:
    for key in keys:
        try:
            default_storage.delete(key)
        except Exception:  # one stuck file must not keep the others
            log.exception("could not delete stored file %s", key)


def user_wipe(*, user) -> dict[str, int]:
    """Delete all of `user`'s data and the user; returns rows deleted per table (ingest.actions
    audits the operator's)."""
    username = user.username
    counts: dict[str, int] = {}
    with transaction.atomic():
        files = _stored_files(user)
        for label, qs in _plan(user):
            # Evaluate ids first: a delete through an OR-ed queryset (traces) must not re-resolve
            # its subquery after the raw events it points at are gone.
            ids = list(qs.values_list("pk", flat=True))
            for start in range(0, len(ids), DELETE_BATCH):
                qs.model.objects.filter(pk__in=ids[start : start + DELETE_BATCH]).delete()
            counts[label] = len(ids)
        user.delete()
        counts["users"] = 1
        counts["stored_files"] = len(files)
        transaction.on_commit(lambda: _delete_files(files))
    log.info("wiped user %s: %s", username, counts)
    return counts

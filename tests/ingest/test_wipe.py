"""User wipe: every row of the user in every table is gone, other users untouched, stored files
deleted after commit (and kept when the wipe rolls back), per-table counts, audit row."""

from datetime import date

import pytest
from django.apps import apps
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import models

from ingest import registry
from ingest.actions import do_user_wipe
from ingest.models import (
    Activity,
    DailySummary,
    ImportJob,
    RawEvent,
    SleepSession,
    TerraConnection,
    TraceEvent,
)
from ingest.registry import UserTable
from ingest.traces import trace_write
from ingest.wipe import user_wipe, user_wipe_preview
from ops.models import AuditLog, UserToken
from ops.services import user_token_create
from tests.factories import RawEventFactory, TerraConnectionFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=False)


def populate(user, terra_user_id):
    conn = TerraConnectionFactory(user=user, terra_user_id=terra_user_id)
    DailySummary.objects.create(user=user, source="garmin", date=date(2026, 1, 1), steps=1)
    SleepSession.objects.create(user=user, source="oura", start_time="2026-01-01T22:00:00Z")
    Activity.objects.create(user=user, source="garmin", start_time="2026-01-01T10:00:00Z")
    resolved = RawEventFactory(terra_user_id=terra_user_id, user=user)
    unresolved = RawEventFactory(terra_user_id=terra_user_id, state="parked")
    by_reference = RawEventFactory(terra_user_id="", reference_id=user.username, event_type="auth")
    trace_write("normalized", raw_event_id=resolved.pk)
    trace_write("parked", raw_event_id=unresolved.pk)
    trace_write("backfill_requested", user_id=user.pk)
    ImportJob.objects.create(
        user=user, days=1, start_date=date(2026, 1, 1), end_date=date(2026, 1, 2)
    )
    user_token_create(user=user)
    return conn, [resolved.pk, unresolved.pk, by_reference.pk]


def lab_models():
    if apps.is_installed("labs"):
        try:
            return apps.get_model("labs", "LabUpload"), apps.get_model("labs", "Biomarker")
        except LookupError:
            return None, None
    return None, None


def add_lab_rows(user, key):
    LabUpload, Biomarker = lab_models()
    if LabUpload is None:
        return None
    default_storage.save(key, ContentFile(b"%PDF-1.4 report"))
    upload = LabUpload.objects.create(
        user=user,
        storage_key=key,
        content_type="application/pdf",
        size=15,
        sha256="0" * 64,
        terra_upload_id=f"up-{user.username}",
    )
    Biomarker.objects.create(
        user=user,
        source="terra_lab",
        code="ldl",
        value=1.0,
        measured_on=date(2026, 1, 1),
        lab_upload=upload,
    )
    RawEventFactory(event_type="lab_report", terra_user_id="", reference_id=f"up-{user.username}")
    return upload


def rows_of(user_pk, terra_user_id, raw_ids):
    found = {}
    for table in registry.user_tables():
        found[table.key] = table.model.objects.filter(user_id=user_pk).count()
    found["raw_events"] = (
        RawEvent.objects.filter(pk__in=raw_ids).count()
        + RawEvent.objects.filter(terra_user_id=terra_user_id).count()
    )
    found["trace_events"] = (
        TraceEvent.objects.filter(user_id=user_pk).count()
        + TraceEvent.objects.filter(raw_event_id__in=raw_ids).count()
    )
    found["terra_connections"] = TerraConnection.objects.filter(user_id=user_pk).count()
    found["import_jobs"] = ImportJob.objects.filter(user_id=user_pk).count()
    found["user_tokens"] = UserToken.objects.filter(user_id=user_pk).count()
    return found


def test_wipe_leaves_no_row_of_the_user_anywhere_and_deletes_files(
    alice, bob, django_capture_on_commit_callbacks
):
    _, alice_raw = populate(alice, "t-alice")
    _, bob_raw = populate(bob, "t-bob")
    alice_upload = add_lab_rows(alice, "lab-uploads/alice/a.pdf")
    add_lab_rows(bob, "lab-uploads/bob/b.pdf")
    preview = user_wipe_preview(user=alice)
    alice_pk = alice.pk

    with django_capture_on_commit_callbacks(execute=True):
        counts = do_user_wipe(user=alice, actor="user:charlie")

    assert {k: counts[k] for k in preview} == {**preview, "stored_files": 1 if alice_upload else 0}
    assert counts["daily_summary"] == 1 and counts["raw_events"] == 3 + (1 if alice_upload else 0)
    assert counts["trace_events"] == 3 and counts["terra_connections"] == 1
    assert counts["import_jobs"] == 1 and counts["user_tokens"] == 1 and counts["users"] == 1
    assert set(rows_of(alice_pk, "t-alice", alice_raw).values()) == {0}
    assert not type(alice).objects.filter(pk=alice_pk).exists()
    # every table that has a user column holds nothing of alice (audit rows keep her id only)
    for model in apps.get_models():
        if model is AuditLog:
            continue
        for field in model._meta.concrete_fields:
            if isinstance(field, models.ForeignKey) and field.related_model is type(alice):
                assert not model.objects.filter(**{field.attname: alice_pk}).exists(), model
    # bob is untouched
    assert all(
        v > 0
        for k, v in rows_of(bob.pk, "t-bob", bob_raw).items()
        if k in ("daily_summary", "raw_events", "trace_events", "terra_connections", "user_tokens")
    )
    if alice_upload:
        assert not default_storage.exists("lab-uploads/alice/a.pdf")
        assert default_storage.exists("lab-uploads/bob/b.pdf")
        assert counts["lab_uploads"] == 1 and counts["biomarkers"] == 1
        assert not RawEvent.objects.filter(reference_id="up-alice").exists()
        assert RawEvent.objects.filter(reference_id="up-bob").exists()
    audit = AuditLog.objects.get(action="user.wipe")
    assert audit.resource == f"user:{alice_pk}" and audit.subject_id == alice_pk
    assert audit.metadata["counts"] == counts


def test_files_of_a_registered_table_are_deleted_only_after_commit(
    alice, django_capture_on_commit_callbacks, registries
):
    """A table registered here (not labs) with stored_files: the generic path."""
    default_storage.save("custom/alice.bin", ContentFile(b"x"))
    registry.register_user_table(
        UserTable(
            "zz_test_files",
            DailySummary,
            sync=False,
            stored_files=lambda row: ["custom/alice.bin"],
        )
    )
    DailySummary.objects.create(user=alice, source="x", date=date(2026, 2, 2))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        user_wipe(user=alice)
    assert default_storage.exists("custom/alice.bin")  # still there until commit
    for callback in callbacks:
        callback()
    assert not default_storage.exists("custom/alice.bin")


def test_a_failed_wipe_rolls_back_rows_and_keeps_files(alice, monkeypatch, registries):
    populate(alice, "t-alice")
    alice_pk = alice.pk
    default_storage.save("custom/keep.bin", ContentFile(b"x"))
    registry.register_user_table(
        UserTable("zz_keep", DailySummary, sync=False, stored_files=lambda row: ["custom/keep.bin"])
    )
    import ingest.actions as actions

    def boom(**kwargs):
        raise RuntimeError("audit down")

    monkeypatch.setattr(actions, "audit_log_write", boom)
    with pytest.raises(RuntimeError):
        do_user_wipe(user=alice)
    assert DailySummary.objects.filter(user_id=alice_pk).exists()
    assert TerraConnection.objects.filter(user_id=alice_pk).exists()
    assert type(alice).objects.filter(pk=alice_pk).exists()
    assert default_storage.exists("custom/keep.bin")


def test_wipe_of_a_user_with_nothing_is_fine():
    user = UserFactory(username="empty")
    counts = user_wipe(user=user)
    assert counts["users"] == 1 and counts["raw_events"] == 0

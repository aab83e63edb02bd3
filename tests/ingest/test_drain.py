"""The drain and replay services and their commands (terra_drain, terra_replay)."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from ingest import registry
from ingest.actions import do_raw_events_drain, do_raw_events_replay
from ingest.decisions import NO_CONNECTION
from ingest.drain import drain_candidates, raw_events_drain
from ingest.models import RawEvent, RawEventState
from ingest.registry import NormalizeResult
from ingest.replay import raw_events_replay
from ops.models import AuditLog
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def noop(monkeypatch):
    monkeypatch.setitem(registry._normalizers, "noop", lambda raw_event: NormalizeResult(ok=True))


def make(state=RawEventState.PENDING, *, age=timedelta(minutes=10), **kwargs):
    kwargs.setdefault("event_type", "noop")
    kwargs.setdefault("payload", {"type": kwargs["event_type"]})
    return RawEventFactory(state=state, received_at=timezone.now() - age, **kwargs)


def test_drain_picks_unprocessed_rows_of_the_last_24_hours(noop):
    pending = make()
    parked = make(RawEventState.PARKED, process_error="flaky")
    due_retry = make(RawEventState.RETRYING, next_attempt_at=timezone.now() - timedelta(seconds=1))
    make(RawEventState.RETRYING, next_attempt_at=timezone.now() + timedelta(minutes=1))
    make(age=timedelta(hours=25))  # too old: manual triage
    make(RawEventState.PARKED, process_error=NO_CONNECTION)
    make(RawEventState.SKIPPED, process_error="skipped:athlete", processed_at=timezone.now())
    make(RawEventState.PROCESSED, processed_at=timezone.now())
    make(RawEventState.DEAD, process_error="boom")
    make(next_attempt_at=timezone.now() + timedelta(minutes=3))  # leased by a consumer
    assert {r.pk for r in drain_candidates()} == {pending.pk, parked.pk, due_retry.pk}


def test_drain_options_add_skipped_and_no_connection_rows(noop):
    skipped = make(RawEventState.SKIPPED, process_error="skipped:x", processed_at=timezone.now())
    waiting = make(RawEventState.PARKED, process_error=NO_CONNECTION)
    assert {r.pk for r in drain_candidates(include_skipped=True)} == {skipped.pk}
    assert {r.pk for r in drain_candidates(include_no_connection=True)} == {waiting.pk}


def test_inline_drain_normalizes_and_counts_outcomes(noop):
    rows = [make() for _ in range(3)] + [make(event_type="nobody_knows")]
    result = raw_events_drain(inline=True)
    assert result.selected == 4
    assert result.outcomes == {"processed": 3, "skipped": 1}
    assert sorted(result.ids) == sorted(r.pk for r in rows)


def test_drain_limit_is_bounded(noop):
    for _ in range(5):
        make()
    assert raw_events_drain(limit=2, inline=True).selected == 2
    assert raw_events_drain(limit=0, inline=True).selected == 1  # at least one
    assert raw_events_drain(limit=10_000, inline=True).selected == 2


def test_drain_include_skipped_reruns_skipped_rows(monkeypatch):
    row = make(
        RawEventState.SKIPPED,
        event_type="late",
        process_error="skipped:unknown_type:late",
        processed_at=timezone.now(),
    )
    monkeypatch.setitem(registry._normalizers, "late", lambda raw_event: NormalizeResult(ok=True))
    result = raw_events_drain(inline=True, include_skipped=True)
    assert result.outcomes == {"processed": 1}
    row.refresh_from_db()
    assert (row.state, row.process_error) == (RawEventState.PROCESSED, None)


def test_queued_drain_enqueues_and_audits_when_an_operator_asks(noop, sync_queue):
    row = make()
    result = do_raw_events_drain(actor="api_key:1:ops")
    assert (result.selected, result.enqueued) == (1, 1)
    row.refresh_from_db()
    assert row.state == RawEventState.PROCESSED  # the sync queue ran it
    audit = AuditLog.objects.get(action="raw_events.drain")
    assert audit.actor == "api_key:1:ops" and audit.metadata["ids"] == [row.pk]


def test_replay_resets_rows_enqueues_them_and_writes_the_audit(
    noop, sync_queue, django_capture_on_commit_callbacks
):
    dead = make(RawEventState.DEAD, process_error="boom", attempts=5)
    done = make(RawEventState.PROCESSED, processed_at=timezone.now(), attempts=1)
    with django_capture_on_commit_callbacks(execute=True):
        count = do_raw_events_replay(ids=[dead.pk, done.pk, 999_999], actor="user:charlie")
    assert count == 2
    for row in (dead, done):
        row.refresh_from_db()
        assert row.state == RawEventState.PROCESSED and row.process_error is None
        assert row.attempts == 1
    audit = AuditLog.objects.get(action="raw_events.replay")
    assert audit.actor == "user:charlie"
    assert audit.metadata["replayed"] == 2 and audit.metadata["requested"] == 3


def test_terra_drain_inline_prints_counts_per_outcome(noop):
    make()
    make(RawEventState.PARKED, event_type="nobody_knows", process_error="x")
    out = StringIO()
    call_command("terra_drain", "--inline", stdout=out)
    text = out.getvalue()
    assert "selected 2" in text
    assert "processed: 1" in text and "skipped: 1" in text
    assert AuditLog.objects.get(action="raw_events.drain").actor == "command:terra_drain"


def test_terra_drain_without_inline_enqueues(noop, sync_queue):
    make()
    out = StringIO()
    call_command("terra_drain", stdout=out)
    assert "enqueued: 1" in out.getvalue()


def test_terra_replay_command(noop, sync_queue, django_capture_on_commit_callbacks):
    row = make(RawEventState.DEAD, process_error="boom")
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("terra_replay", str(row.pk), stdout=out)
    assert "replayed 1 raw event(s)" in out.getvalue()
    row.refresh_from_db()
    assert row.state == RawEventState.PROCESSED


def test_terra_replay_with_an_unknown_id_fails_but_replays_the_known_ones(
    noop, sync_queue, django_capture_on_commit_callbacks
):
    # Seen: "1 not found" and exit status 0, so a script could not tell a typo from success.
    row = make(RawEventState.DEAD, process_error="boom")
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(CommandError, match="1 of the given raw event ids do not exist"),
    ):
        call_command("terra_replay", str(row.pk), "424242", stdout=StringIO())
    row.refresh_from_db()
    assert row.state == RawEventState.PROCESSED


def test_terra_replay_of_nothing_fails():
    with pytest.raises(CommandError):
        call_command("terra_replay", "424242", stdout=StringIO())


def test_replayed_rows_are_visible_as_pending_until_consumed(noop):
    row = make(RawEventState.DEAD, process_error="boom")
    raw_events_replay(ids=[row.pk])
    assert RawEvent.objects.get(pk=row.pk).state == RawEventState.PENDING

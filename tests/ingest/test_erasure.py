"""Erasure for ingest and labs: the wipe finds deliveries by every Terra user id the user ever had,
takes idempotent answers that name them, redacts their identifiers from operator history, and deliveries that still arrive for a wiped
Terra user are stored, skipped as `skipped:wiped_user` and kept no longer than the traces."""

import json
from datetime import timedelta

import httpx
import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from ingest import connections
from ingest.actions import do_user_wipe
from ingest.models import RawEvent, RawEventState, TerraConnection, TraceEvent
from ingest.tasks import cleanup_task
from ingest.terra.client import TerraError
from ingest.traces import trace_write
from ingest.wipe import user_wipe
from labs.models import LabUpload
from ops.models import AuditLog, IdempotencyKey
from ops.services import audit_log_write
from tests.conftest import load_fixture
from tests.factories import RawEventFactory, TerraConnectionFactory, UserFactory
from tests.ingest.conftest import TERRA_USER

pytestmark = pytest.mark.django_db

NEW_TERRA = "9c8b7a65-4321-4fed-a0b9-87c6d5e4f321"  # user_reauth.json's new_user
DEAUTH = "/v2/auth/deauthenticateUser"


def wipe(user, capture):
    with capture(execute=True):
        return do_user_wipe(user=user, actor="user:charlie")


def test_deliveries_of_a_terra_user_id_the_user_had_before_a_reauth_are_wiped(
    alice, post, fixture_payload, django_capture_on_commit_callbacks
):
    post(fixture_payload("auth.json", reference="alice", terra_user=TERRA_USER))
    post(fixture_payload("user_reauth.json", reference="alice"))
    assert TerraConnection.objects.get().terra_user_id == NEW_TERRA
    # Arrives for the retired id, naming nobody: parked, belonging to no user.
    late = post(fixture_payload("daily.json", reference="", terra_user=TERRA_USER)).json()
    assert RawEvent.objects.get(pk=late["raw_event_id"]).user_id is None

    wipe(alice, django_capture_on_commit_callbacks)

    assert not RawEvent.objects.filter(terra_user_id=TERRA_USER).exists()
    assert not RawEvent.objects.exists()


def test_idempotent_answers_that_belong_to_the_user_are_wiped(
    alice, bob, django_capture_on_commit_callbacks
):
    upload = LabUpload.objects.create(
        user=alice, storage_key="k", content_type="application/pdf", size=1, sha256="0"
    )
    later = timezone.now() + timedelta(hours=1)

    def answer(principal, key, body):
        return IdempotencyKey.objects.create(
            principal=principal,
            key=key,
            endpoint="POST /v1/x",
            body_hash="0" * 64,
            status_code=201,
            response_body=json.dumps(body).encode(),
            expires_at=later,
        )

    answer("user:alice", "own", {"ok": True})
    answer("api_key:1:oncall", "names-upload", {"params": {"upload_id": str(upload.pk)}})
    answer("api_key:1:oncall", "names-alice", {"subject": "alice"})
    kept = answer("api_key:1:oncall", "names-bob", {"subject": "bob", "note": "alice-like"})

    counts = wipe(alice, django_capture_on_commit_callbacks)

    assert counts["idempotency_keys"] == 3
    assert list(IdempotencyKey.objects.all()) == [kept]


def test_a_delivery_for_a_wiped_terra_user_is_stored_and_skipped_as_wiped_user(
    alice, post, fixture_payload, django_capture_on_commit_callbacks
):
    post(fixture_payload("auth.json", reference="alice", terra_user=TERRA_USER))
    wipe(alice, django_capture_on_commit_callbacks)

    for name in ("daily.json", "auth.json", "deauth.json"):
        response = post(fixture_payload(name, reference="alice", terra_user=TERRA_USER))
        assert response.status_code == 200

    rows = RawEvent.objects.order_by("id")
    assert [(r.state, r.process_error) for r in rows] == [
        (RawEventState.SKIPPED, "skipped:wiped_user")
    ] * 3
    # the auth naming alice did not bring her back
    assert not type(alice).objects.filter(username="alice").exists()
    assert not TerraConnection.objects.exists()


def test_a_lab_report_for_a_wiped_upload_is_skipped_as_wiped_user(
    alice, post, django_capture_on_commit_callbacks
):
    payload = load_fixture("lab_report.completed.json")
    terra_upload_id = payload["upload_id"]
    LabUpload.objects.create(
        user=alice,
        storage_key="k",
        content_type="application/pdf",
        size=1,
        sha256="0",
        terra_upload_id=terra_upload_id,
    )
    wipe(alice, django_capture_on_commit_callbacks)
    post(payload)
    assert RawEvent.objects.get().process_error == "skipped:wiped_user"


def test_only_digests_of_wiped_references_are_kept(alice, django_capture_on_commit_callbacks):
    from ingest.models import WipedReference

    TerraConnectionFactory(user=alice, terra_user_id=TERRA_USER)
    wipe(alice, django_capture_on_commit_callbacks)
    [kept] = WipedReference.objects.all()
    assert TERRA_USER not in kept.digest and len(kept.digest) == 64


def test_deliveries_of_wiped_users_are_kept_no_longer_than_the_traces(settings):
    settings.TRACE_RETENTION_DAYS = 30
    old = timezone.now() - timedelta(days=31)
    expired = RawEventFactory(state="skipped", process_error="skipped:wiped_user", received_at=old)
    trace_write("skipped", raw_event_id=expired.pk)
    recent = RawEventFactory(state="skipped", process_error="skipped:wiped_user")
    other = RawEventFactory(state="skipped", process_error="skipped:athlete", received_at=old)

    summary = cleanup_task()

    assert summary["wiped_deliveries"] >= 1
    assert set(RawEvent.objects.values_list("pk", flat=True)) == {recent.pk, other.pk}
    assert not TraceEvent.objects.filter(raw_event_id=expired.pk).exists()


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ((200, {"status": "success"}), "deauthenticated"),
        ((404, {"status": "error"}), "not_found"),
        ((429, {}), "retry later"),
        ((502, {}), "retry later"),
        (httpx.ConnectError("down"), "retry later"),
        ((400, {"message": "bad id"}), "refused"),
    ],
)
def test_deauthenticating_one_terra_user_tells_done_from_retry_from_refused(terra, answer, outcome):
    """The step the terra-deauthenticate workflow retries: what may succeed later raises
    Retryable (tests/ingest/test_deauthenticate_workflow.py runs the workflow)."""
    terra.on("DELETE", DEAUTH, answer)
    if outcome == "retry later":
        with pytest.raises(connections.TerraDeauthRetryable):
            connections.terra_user_deauthenticate(terra_user_id="t-1")
    elif outcome == "refused":
        with pytest.raises(TerraError):
            connections.terra_user_deauthenticate(terra_user_id="t-1")
    else:
        assert connections.terra_user_deauthenticate(terra_user_id="t-1") == outcome
    [sent] = terra.calls("DELETE", DEAUTH)
    assert sent.url.params["user_id"] == "t-1"


def test_operator_history_that_names_the_user_keeps_its_rows_without_the_names(
    alice, staff, django_capture_on_commit_callbacks
):
    malice = UserFactory(username="malice")
    conn = TerraConnectionFactory(user=alice, terra_user_id="t-alice-1")
    upload = LabUpload.objects.create(
        user=alice, storage_key="k", content_type="application/pdf", size=1, sha256="0"
    )
    audit_log_write(action="auth.login_failed", actor="anonymous", resource="user:alice")
    audit_log_write(
        action="terra_connection.backfill",
        actor="user:charlie",
        resource=f"terra_connection:{conn.pk}",
        metadata={"terra_user_id": "t-alice-1", "outcomes": [{"terra_user_id": "t-alice-1"}]},
    )
    audit_log_write(action="workflow.create", actor="x", resource=f"workflow:lab-{upload.pk}")
    audit_log_write(action="other", actor="user:malice", resource="user:malice")
    LogEntry.objects.create(
        user=staff,
        content_type=ContentType.objects.get_for_model(TerraConnection),
        object_id=str(conn.pk),
        object_repr=str(conn),
        action_flag=CHANGE,
        change_message="Requested 4 backfill(s) for t-alice-1.",
    )
    alice_pk = alice.pk

    counts = wipe(alice, django_capture_on_commit_callbacks)

    assert counts["history_redacted"] == 4
    history = json.dumps(
        [[a.actor, a.resource, a.metadata] for a in AuditLog.objects.all()]
        + [[e.object_id, e.object_repr, e.change_message] for e in LogEntry.objects.all()]
    )
    for value in ("t-alice-1", str(upload.pk), '"user:alice"', "alice ·"):
        assert value not in history, value
    assert f"user:user#{alice_pk}" in history
    assert AuditLog.objects.get(action="other").resource == "user:malice"  # not hers
    assert malice.username == "malice"


def test_another_apps_stopper_runs_before_anything_is_deleted(alice, registries):
    """The hook a workflow engine fills in to terminate the user's live instances and runs."""
    from ops.userdata import stopper_register

    seen = []

    def stop(subject):
        seen.append((subject.pk, TerraConnection.objects.filter(user_id=subject.pk).count()))
        return 2

    stopper_register("engine", stop)
    TerraConnectionFactory(user=alice)
    alice_pk = alice.pk
    counts = user_wipe(user=alice)
    assert seen == [(alice_pk, 1)] and counts["stopped_engine"] == 2


def test_the_simulator_deauthenticates_and_then_sends_a_deauth(monkeypatch, alice):
    from demo import simulator
    from ingest.terra import client as terra_client

    sent: list[dict] = []
    monkeypatch.setattr(simulator, "_deliver_later", sent.extend)
    terra_client.set_transport(simulator.simulator_transport())
    TerraConnectionFactory(user=alice, terra_user_id="t-sim")
    answer = terra_client.get_terra_client().deauthenticate_user(terra_user_id="t-sim")
    assert answer == {"status": "success"}
    assert [(p["type"], p["user"]["user_id"], p["user"]["active"]) for p in sent] == [
        ("deauth", "t-sim", False)
    ]


def test_wiping_leaves_other_users_deliveries_alone(
    alice, bob, post, fixture_payload, django_capture_on_commit_callbacks
):
    post(fixture_payload("auth.json", reference="alice", terra_user=TERRA_USER))
    post(fixture_payload("auth.json", reference="bob", terra_user=NEW_TERRA))
    post(fixture_payload("daily.json", reference="bob", terra_user=NEW_TERRA))
    wipe(alice, django_capture_on_commit_callbacks)
    post(fixture_payload("daily.json", reference="bob", terra_user=NEW_TERRA) | {"x": 1})
    assert RawEvent.objects.filter(process_error="skipped:wiped_user").count() == 0
    assert RawEvent.objects.filter(user=bob).count() == 3  # bob's data still arrives

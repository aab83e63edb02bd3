"""After a full life — deliveries of every type, a re-authentication, a lab upload parsed into
biomarkers, the lab-out-of-range graph run waiting at its clinician's node, a code workflow
started for the user through the API, operator reads and actions — a wipe (and the Terra
deauthentication it starts, run to completion) leaves no trace of the user in any text, JSON or
binary column of any table: not the username, not a Terra user id, not an upload id, not a
biomarker value. The audit row's counts are the only thing left, and they hold no values."""

import copy
import uuid
from datetime import UTC, datetime

import pytest
from django.db import connection
from rest_framework.test import APIClient

import demo.examples  # noqa: F401 - registers demo-onboarding, the code workflow started for them
from demo.graph_demo import MARKERS as DEMO_MARKERS
from demo.graph_demo import start_demo_run
from graphs.models import GraphRun, GraphToken
from ingest.actions import do_user_wipe
from ingest.consumer import raw_event_consume
from ingest.models import RawEvent, TerraConnection
from labs.models import Biomarker, LabUpload
from ops.services import user_token_create
from tests.conftest import load_fixture
from tests.factories import UserFactory
from tests.graphs.conftest import web  # noqa: F401 - fixture: the clinic's webhook
from tests.labs.helpers import PDF, upload
from workflows.models import WorkflowInstance
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db

USERNAME = "zq-wiped-person"
TERRA_FIRST = "7a1e0000-aaaa-4bbb-8ccc-0000000000a1"
TERRA_AFTER_REAUTH = "7a1e0000-aaaa-4bbb-8ccc-0000000000a2"
TERRA_UPLOAD = "upl_zq7e0c4b1d9f"
MARKERS = {"hba1c": 6.987654, "ldl": 190.123456}
HOOK = "https://hooks.test/clinic-hook"
TEXT_TYPES = ("CharField", "TextField", "JSONField", "SlugField", "EmailField", "UUIDField")


def lab_report() -> dict:
    payload = load_fixture("lab_report.completed.json")
    payload["upload_id"] = TERRA_UPLOAD
    result = payload["data"]["results"][0]
    payload["data"]["results"] = []
    for code, value in MARKERS.items():
        item = copy.deepcopy(result)
        item["biomarker"]["key"] = code
        item["source"]["value"] = str(value)
        item["measurement"]["numeric"] = value
        payload["data"]["results"].append(item)
    return payload


def _columns():
    """(table, column, kind) of every text, JSON, UUID and binary column of every table."""
    intro = connection.introspection
    with connection.cursor() as cursor:
        for table in intro.get_table_list(cursor):
            if table.type != "t":
                continue
            for column in intro.get_table_description(cursor, table.name):
                kind = intro.get_field_type(column.type_code, column)
                if kind in TEXT_TYPES:
                    yield table.name, column.name, "text"
                elif kind == "BinaryField":
                    yield table.name, column.name, "binary"


def _count(table: str, column: str, kind: str, needle: str) -> int:
    quote = connection.ops.quote_name
    if connection.vendor == "postgresql":
        where = (
            f"position(%s::bytea in {quote(column)}) > 0"
            if kind == "binary"
            else f"strpos({quote(column)}::text, %s) > 0"
        )
    else:
        where = f"instr({quote(column)}, %s) > 0"
    param = needle.encode() if kind == "binary" else needle
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {quote(table)} WHERE {where}", [param])
        return cursor.fetchone()[0]


def scan(needles: list[str]) -> tuple[dict, list]:
    """{(table, column): hits} over every needle, and the columns scanned."""
    hits, scanned = {}, []
    for table, column, kind in _columns():
        scanned.append((table, column))
        found = sum(_count(table, column, kind, needle) for needle in needles)
        if found:
            hits[(table, column)] = found
    return hits, scanned


@pytest.fixture
def harness(db):
    with WorkflowHarness(start=datetime(2026, 3, 1, 9, 0, tzinfo=UTC)) as h:
        yield h


def live_a_full_life(
    person, post, fixture_payload, deliver, terra, harness, operator_api, staff, settings
):
    for name in ("auth.json", "daily.json", "sleep.json", "activity.json", "body.json"):
        post(fixture_payload(name, reference=USERNAME, terra_user=TERRA_FIRST))
    for name in ("athlete.json", "menstruation.json", "nutrition.json"):
        post(fixture_payload(name, reference=USERNAME, terra_user=TERRA_FIRST))
    reauth = fixture_payload("user_reauth.json", reference=USERNAME)
    reauth["old_user"]["user_id"], reauth["new_user"]["user_id"] = TERRA_FIRST, TERRA_AFTER_REAUTH
    post(reauth)
    post(fixture_payload("daily.json", reference="", terra_user=TERRA_FIRST))  # parked, nobody's
    post(fixture_payload("sleep.json", reference=USERNAME, terra_user=TERRA_AFTER_REAUTH))
    # a lab upload, forwarded by its workflow, parsed into biomarkers
    terra.on("POST", "/v2/lab-reports", (200, {"upload_id": TERRA_UPLOAD}))
    _, token = user_token_create(user=person)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert upload(client, PDF).status_code == 202
    harness.run_until_idle()
    raw_event_consume(deliver(lab_report()).json()["raw_event_id"])
    harness.run_until_idle()
    assert set(Biomarker.objects.filter(source="terra_lab").values_list("value", flat=True)) >= set(
        MARKERS.values()
    )
    # the demo's out-of-range upload starts the lab-out-of-range graph: it notifies the clinic
    # and waits for a clinician
    settings.GRAPHS_HTTP_SECRETS = {"CLINIC_TOKEN": "t0ken"}
    run = start_demo_run(hook_url=HOOK, username=USERNAME)
    harness.run_until_idle()
    assert GraphToken.objects.get(run=run, node_ref="ack").status == "executing"
    # a code workflow started for them through the API, given an event
    workflows_api = operator_api("*", name="coach")
    created = workflows_api.post(
        "/v1/workflows/demo-onboarding/instances",
        {"params": {"user": USERNAME, "confirm_within": "1 day"}, "subject": USERNAME},
        format="json",
        HTTP_IDEMPOTENCY_KEY="onboarding-1",
    )
    assert created.status_code == 201, created.json()
    harness.run_until_idle()
    harness.advance("30 seconds")  # past its nap: waiting for the goal
    sent = workflows_api.post(
        f"/v1/workflows/demo-onboarding/instances/{created.json()['id']}/events",
        {"type": "goal_confirmed", "payload": {"goal_steps": 12345, "for": USERNAME}},
        format="json",
    )
    assert sent.status_code == 200, sent.json()
    harness.run_until_idle()
    # an operator reads, backfills and replays
    ops = operator_api("*", name="oncall")
    some = RawEvent.objects.filter(user=person).first()
    assert ops.get(f"/v1/admin/raw-events/{some.pk}").status_code == 200
    assert ops.get(f"/v1/admin/users/{USERNAME}").status_code == 200
    assert ops.get("/v1/admin/traces", {"user": USERNAME}).status_code == 200
    console = APIClient()
    console.force_login(staff)
    connection_pk = TerraConnection.objects.get(user=person).pk
    console.post(
        f"/admin/ingest/terraconnection/{connection_pk}/backfill/", {"days": 3, "confirm": "yes"}
    )
    console.post(f"/admin/ingest/rawevent/{some.pk}/replay/", {"confirm": "yes"})
    console.get(f"/admin/labs/labupload/{LabUpload.objects.earliest('created_at').pk}/change/")


def test_after_a_wipe_no_table_holds_the_users_names_ids_or_values(
    post,
    fixture_payload,
    deliver,
    terra,
    harness,
    operator_api,
    staff,
    django_capture_on_commit_callbacks,
    capsys,
    web,  # noqa: F811 - the fixture
    settings,
):
    person = UserFactory(username=USERNAME)
    live_a_full_life(
        person, post, fixture_payload, deliver, terra, harness, operator_api, staff, settings
    )
    upload_ids = [str(pk) for pk in LabUpload.objects.values_list("pk", flat=True)]
    needles = [
        USERNAME,
        TERRA_FIRST,
        TERRA_AFTER_REAUTH,
        TERRA_UPLOAD,
        *upload_ids,
        *(uuid.UUID(upload_id).hex for upload_id in upload_ids),
        *(str(value) for value in MARKERS.values()),
        # the demo upload's out-of-range values, as the graph run's context holds them
        *(f'"value": {value}' for _, _, value, *_ in DEMO_MARKERS),
    ]
    assert GraphRun.objects.filter(subject=person).count() == 1
    assert dict(WorkflowInstance.objects.values_list("workflow_name", "status")) == {
        "lab-report": "complete",
        "graph-run": "waiting",
        "demo-onboarding": "complete",
    }
    before, scanned = scan(needles)

    with django_capture_on_commit_callbacks(execute=True):
        counts = do_user_wipe(user=person, actor="user:charlie")
    harness.run_until_idle()  # the Terra deauthentication the wipe started
    assert dict(WorkflowInstance.objects.values_list("workflow_name", "status")) == {
        "terra-deauthenticate": "complete"
    }
    after, _ = scan(needles)

    with capsys.disabled():
        print(
            f"\nerasure scan ({connection.vendor}): {len(scanned)} columns of "
            f"{len({t for t, _ in scanned})} tables, every one"
        )
        print(f"  hits before the wipe: {sum(before.values())} in {sorted(before)}")
        print(f"  hits after the wipe:  {sum(after.values())} {sorted(after)}")
        print(f"  wipe counts: {counts}")
    assert before, "the scan finds the user before the wipe"
    assert after == {}

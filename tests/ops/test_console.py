"""The console's shared pieces: one read-only admin base, one confirmation page with one POST
key for every app, console actions in Django's "Recent actions", and Replay on a raw event."""

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry

from ingest.models import RawEvent
from ops.console import ReadOnlyAdmin
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db

# ApiKey/UserToken stay editable (name, scopes); every other console model is evidence.
EDITABLE = {"apikey", "usertoken"}
PROJECT_APPS = {"ops", "ingest", "labs", "workflows"}


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


def test_every_read_only_console_model_uses_the_one_admin_base():
    # Seen: the same has_add/change/delete trio was copied into 9 admin classes.
    ours = {
        model._meta.model_name: model_admin
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in PROJECT_APPS
    }
    for name, model_admin in ours.items():
        if name in EDITABLE:
            continue
        assert isinstance(model_admin, ReadOnlyAdmin), name
        overrides = {"has_add_permission", "has_change_permission", "has_delete_permission"}
        assert not overrides & set(type(model_admin).__dict__), name


def test_console_actions_appear_in_recent_actions(console):
    # Seen: replay, drain, wipe … wrote the audit log but the front page's "Recent actions"
    # (Django's LogEntry) stayed empty.
    rows = [RawEventFactory(state="dead", process_error="boom") for _ in range(2)]
    console.post(
        "/admin/ingest/rawevent/",
        {"action": "replay_selected", "_selected_action": [r.pk for r in rows], "confirm": "yes"},
    )
    entries = LogEntry.objects.filter(object_id__in=[str(r.pk) for r in rows])
    assert entries.count() == 2
    assert entries.first().change_message == "Replayed 2 raw event(s)."
    front = console.get("/admin/").content.decode()
    assert "Recent actions" in front
    assert str(rows[0]) in front


def test_the_raw_event_page_has_replay_with_confirmation(console):
    # Seen: a raw event's own page offered no way to replay it.
    row = RawEventFactory(state="dead", process_error="boom")
    page = console.get(f"/admin/ingest/rawevent/{row.pk}/change/").content.decode()
    replay = f"/admin/ingest/rawevent/{row.pk}/replay/"
    assert f'href="{replay}"' in page
    confirm = console.get(replay)
    assert confirm.templates[0].name == "admin/ops/confirm.html"
    assert RawEvent.objects.get(pk=row.pk).state == "dead"  # nothing happens on GET
    done = console.post(replay, {"confirm": "yes"}, follow=True)
    assert f"Replayed 1 raw event(s) (#{row.pk})." in done.content.decode()
    assert RawEvent.objects.get(pk=row.pk).state == "pending"


@pytest.mark.parametrize(
    "url, data",
    [
        ("/admin/ingest/rawevent/", {"action": "replay_selected"}),
        ("/admin/ingest/rawevent/drain/", None),
        ("/admin/labs/labupload/", {"action": "retry_forwarding"}),
        ("/admin/workflows/workflowinstance/", {"action": "terminate_selected"}),
    ],
)
def test_every_app_confirms_on_the_same_page_with_the_same_key(console, url, data, alice):
    # Seen: three confirmation templates, posting confirm=yes or confirmed=yes.
    from labs.models import LabUpload
    from workflows.models import WorkflowInstance

    selected = {
        "/admin/ingest/rawevent/": lambda: RawEventFactory(state="dead").pk,
        "/admin/labs/labupload/": lambda: (
            LabUpload.objects.create(
                user=alice, storage_key="k", content_type="application/pdf", size=1, sha256="0"
            ).pk
        ),
        "/admin/workflows/workflowinstance/": lambda: (
            WorkflowInstance.objects.create(
                workflow_name="x",
                instance_id="i",
                version=1,
                created_at="2026-01-01T00:00:00Z",
                updated_at="2026-01-01T00:00:00Z",
            ).pk
        ),
    }
    if data is None:
        response = console.get(url)
    else:
        response = console.post(url, {**data, "_selected_action": [selected[url]()]})
    assert response.templates[0].name == "admin/ops/confirm.html"
    assert '<input type="hidden" name="confirm" value="yes">' in response.content.decode()

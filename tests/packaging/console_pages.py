"""Run by tests/packaging/test_wheel.py with the python of a fresh venv that has only the built
wheel installed: creates a superuser and a few rows, then renders every console page through
Django's test client and prints one line per page. Exits non-zero if a page fails or a template
comes from anywhere but the installed packages. Imports nothing from the source tree."""

import os
import sys
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib import admin  # noqa: E402
from django.contrib.admin import helpers  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

import ops  # noqa: E402
from ingest.models import RawEvent, TerraConnection  # noqa: E402
from labs.models import LabUpload  # noqa: E402
from workflows import get_workflow  # noqa: E402
from workflows.models import WorkflowInstance  # noqa: E402

SITE = Path(ops.__file__).resolve().parent.parent
OWN_TEMPLATES = ("admin/ops/", "admin/ingest/", "admin/labs/", "admin/workflows/")


def seed():
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    alice = get_user_model().objects.create_user("alice")
    connection = TerraConnection.objects.create(user=alice, terra_user_id="t-1", provider="OURA")
    RawEvent.objects.create(
        event_type="sleep",
        terra_user_id="t-1",
        payload={"type": "sleep"},
        dedup_key="0" * 64,
        process_error="boom",
        state="dead",
        user=alice,
    )
    LabUpload.objects.create(
        user=alice,
        storage_key="lab-uploads/alice/x.pdf",
        content_type="application/pdf",
        size=3,
        sha256="0" * 64,
        terra_status="failed:502",
    )
    get_workflow("demo-onboarding").create(id="packaged", params={"user": "alice"})
    return user, alice, connection


def pages(alice, connection):
    """(method, url, data) for every console page."""
    urls = [("get", reverse("admin:index"), None), ("get", "/api/docs/", None)]
    for model in admin.site._registry:
        opts = model._meta
        urls.append(("get", reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"), None))
        first = model._default_manager.first()
        if first is not None:
            change = f"admin:{opts.app_label}_{opts.model_name}_change"
            urls.append(("get", reverse(change, args=[first.pk]), None))
    instance = WorkflowInstance.objects.get(instance_id="packaged")
    raw_event = RawEvent.objects.get()
    upload = LabUpload.objects.get()
    urls += [
        ("get", reverse("admin:ingest_rawevent_drain"), None),
        ("get", reverse("admin:ingest_terraconnection_backfill", args=[connection.pk]), None),
        ("get", reverse("admin:ingest_user_overview", args=[alice.username]), None),
        ("get", reverse("admin:ingest_user_wipe", args=[alice.username]), None),
        ("get", reverse("admin:workflows_instance_send_event", args=[instance.pk]), None),
        ("get", reverse("admin:workflows_instance_action", args=[instance.pk, "terminate"]), None),
        ("get", reverse("admin:workflows_activate_version", args=["demo-onboarding", 1]), None),
    ]
    for model, action, pk in (
        (RawEvent, "replay_selected", raw_event.pk),
        (LabUpload, "retry_forwarding", upload.pk),
        (WorkflowInstance, "terminate_selected", instance.pk),
    ):
        opts = model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        urls.append(("post", url, {"action": action, helpers.ACTION_CHECKBOX_NAME: [str(pk)]}))
    return urls


def main() -> int:
    setup_test_environment()  # records the templates each response rendered
    user, alice, connection = seed()
    client = Client()
    client.force_login(user)
    failures = 0
    for method, url, data in pages(alice, connection):
        response = getattr(client, method)(url, data) if data else getattr(client, method)(url)
        # The project's own templates must come from the installed packages.
        ours = {t.origin.name for t in response.templates if t.name.startswith(OWN_TEMPLATES)}
        foreign = sorted(o for o in ours if not Path(o).resolve().is_relative_to(SITE))
        ok = response.status_code == 200 and not foreign
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'} {response.status_code} {method.upper()} {url} {foreign}")
    front = client.get(reverse("admin:index"))
    if "Ingest — last 24 hours" not in front.content.decode():
        print("FAIL the front page has no ingest dashboard")
        failures += 1
    print(f"templates from {SITE}; DEBUG={settings.DEBUG}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

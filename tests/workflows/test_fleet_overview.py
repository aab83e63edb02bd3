"""Where operators see the fleet: the console's workflow overview shows running /
queued per workflow and per concurrency key and the schedules with their next fire time;
`manage.py workflows list` and `vitalflow-wf workflows list` show the schedules."""

import io

from django.core.management import call_command

from tests.workflows.test_cli import server, wf  # noqa: F401 - fixtures
from tests.workflows.test_fleet_concurrency import claim
from workflows import services, triggers

OVERVIEW = "/admin/workflows/workflowdeployment/"


def section(page: str, name: str) -> str:
    start = page.index(f"<h2>{name} —")
    end = page.find("<h2>", start + 1)
    return page[start : end if end != -1 else len(page)]


def test_the_overview_shows_running_and_queued_per_workflow_and_per_key(
    client, staff, harness, fleet
):
    for n, user in enumerate(["ann", "ann", "bob", "ann"]):
        services.instance_create(
            workflow_name="fleet-per-user", instance_id=f"u{n}", params={"user": user}
        )
    assert claim() == "u0" and claim() == "u2"  # one running per user; u1, u3 queued for ann
    client.force_login(staff)
    page = section(client.get(OVERVIEW).content.decode(), "fleet-per-user")
    assert "running 2 · queued 2" in page
    assert "cap 1 per user" in page
    assert "<tr><td>ann</td><td>1</td><td>2</td></tr>" in page
    assert "<tr><td>bob</td><td>1</td><td>0</td></tr>" in page


def test_the_overview_shows_schedules_with_their_next_fire_time(client, staff, harness, cron_fleet):
    harness.run_until_idle()  # first sight at 12:00
    triggers.pause(workflow_name="cron-berlin")
    client.force_login(staff)
    page = client.get(OVERVIEW).content.decode()
    quarter = section(page, "cron-quarter")
    assert "<code>*/15 * * * *</code></td><td>UTC</td>\n      <td>2026-01-01 12:15</td>" in quarter
    assert "<code>0 * * * *</code></td><td>UTC</td>\n      <td>2026-01-01 13:00</td>" in quarter
    assert "<b>paused</b>" in section(page, "cron-berlin")


def test_manage_py_workflows_list_shows_schedules(harness, cron_fleet):
    harness.run_until_idle()
    out = io.StringIO()
    call_command("workflows", "list", stdout=out)
    assert "cron-quarter  versions=1  active=1\n" in out.getvalue()
    assert "  schedule '*/15 * * * *' (UTC): next 2026-01-01T12:15Z\n" in out.getvalue()
    assert "  schedule '0 9 * * *' (Europe/Berlin): next 2026-01-02T08:00Z\n" in out.getvalue()


def test_vitalflow_wf_workflows_list_shows_schedules(wf, harness, cron_fleet):  # noqa: F811
    harness.run_until_idle()
    code, out, _ = wf("workflows", "list")
    assert code == 0
    assert "cron-quarter  versions=1  active=1\n" in out
    assert "  schedule '*/15 * * * *' (UTC): next 2026-01-01T12:15:00Z\n" in out

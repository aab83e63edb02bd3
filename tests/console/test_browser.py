"""The console in a real browser (Chromium at 1400 px): the instance waterfall, a failed step's
traceback, a graph run's waiting node, live refresh without reload and its pause button, and an
instances list without horizontal scrolling. Screenshots land in var/screenshots/."""

import pytest

from graphs.models import GraphRun
from tests.console.browser import screenshot
from workflows.models import WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)


def open_instance(page, instance_id):
    pk = WorkflowInstance.objects.get(instance_id=instance_id).pk
    page.goto(f"/admin/workflows/workflowinstance/{pk}/change/")


def test_the_instance_page_draws_one_bar_per_step(page, harness):
    harness.create("console-many", id="many-5", params={"steps": 5})
    open_instance(page, "many-5")
    assert page.locator("svg.vf-waterfall rect.vf-bar").count() == 5
    assert page.locator("details.vf-step").count() == 5
    screenshot(page, "instance-waterfall")


def test_expanding_a_failed_step_shows_its_traceback(page, harness):
    harness.create("console-flaky", id="flaky", params={"reading": "glucose=7.9"})
    harness.advance("10 seconds")
    harness.advance("10 seconds")
    open_instance(page, "flaky")
    traceback = page.locator("#step-1 pre.vf-traceback")
    assert not traceback.is_visible()
    page.locator("#step-1 > summary").click()
    assert traceback.is_visible() and "in _fetch_marker" in traceback.inner_text()
    assert page.locator("svg.vf-waterfall rect.vf-failed").count() == 3
    screenshot(page, "instance-failed-step-traceback")


def test_a_graph_runs_waiting_node_is_coloured_waiting(page, approval_run):
    page.goto(f"/admin/graphs/graphrun/{approval_run.pk}/change/")
    node = page.locator('g.vf-node[data-node="ack"]')
    assert node.get_attribute("data-state") == "waiting"
    assert node.locator("rect").get_attribute("fill") == "#fef08a"
    assert page.locator('g.vf-node[data-node="done"]').get_attribute("data-state") == "not_reached"
    screenshot(page, "graph-run-waiting")


def test_the_front_page_lists_who_waits_for_a_person(page, approval_run):
    page.goto("/admin/")
    panel = page.locator("#waiting-dashboard")
    assert "approve / " + GraphRun.objects.get().run_id in panel.inner_text()
    screenshot(page, "front-page")


def test_the_instance_page_follows_the_run_without_a_reload(page, harness):
    harness.create("console-approval", id="live")  # sleeping a minute
    open_instance(page, "live")
    page.evaluate("window.notReloaded = true")
    assert page.locator("details.vf-step").count() == 2
    harness.advance("1 minute")  # the sleep ends; it waits for the doctor
    page.locator("#step-2").wait_for()
    assert page.evaluate("window.notReloaded") is True
    harness.send_event("console-approval", "live", "approved", {"by": "dr"})
    page.locator("#instance-status", has_text="complete").wait_for()
    page.locator('#vf-live[data-live-status="stopped"]').wait_for()  # nothing in flight
    assert page.evaluate("window.notReloaded") is True
    screenshot(page, "instance-live-complete")


def test_pause_stops_the_polling_and_resume_catches_up(page, harness):
    harness.create("console-approval", id="paused")
    open_instance(page, "paused")
    live = page.locator("#vf-live")
    page.wait_for_function("Number(document.getElementById('vf-live').dataset.livePolls) >= 1")
    page.get_by_role("button", name="Pause live refresh").click()
    assert live.get_attribute("data-live-status") == "paused"
    polls = live.get_attribute("data-live-polls")
    harness.advance("1 minute")
    page.wait_for_timeout(1000)  # four poll intervals: none may happen while paused
    assert live.get_attribute("data-live-polls") == polls
    assert page.locator("#step-2").count() == 0
    page.get_by_role("button", name="Resume live refresh").click()
    page.locator("#step-2").wait_for()


def test_the_instances_list_fits_1400_px_without_horizontal_scrolling(page, harness):
    for i in range(20):
        harness.create(
            "console-flaky",
            id=f"patient-intake-{i:04d}-" + "x" * 40,
            params={"reading": "r" * 200},
        )
    harness.create("console-many", id="many", params={"steps": 3})
    page.goto("/admin/workflows/workflowinstance/")
    assert page.locator("#result_list tbody tr").count() == 21
    for column in ("current step", "started", "duration", "last error"):
        assert page.locator("#result_list thead th", has_text=column).count() == 1
    assert horizontal_overflow(page) == {"page": 0, "results": 0}
    screenshot(page, "instances-list-1400")


def horizontal_overflow(page) -> dict:
    """Pixels hidden to the right: of the page, and of the list's own scroll box (the admin
    scrolls a too-wide table inside .results instead of widening the page)."""
    return page.evaluate(
        """() => {
          const over = (el) => Math.max(el.scrollWidth - el.clientWidth, 0);
          return {page: over(document.documentElement),
                  results: over(document.querySelector("#changelist-form .results"))};
        }"""
    )


def test_the_dlq_and_audit_lists_fit_1400_px(page):
    from ops.models import AuditLog
    from tests.factories import RawEventFactory

    for i in range(10):
        RawEventFactory(
            state="dead",
            attempts=5,
            process_error="RuntimeError: " + "upstream schema changed " * 12,
            process_traceback='Traceback (last 1 of 1 frames):\n  File "x.py", line 1, in f\nRuntimeError',
        )
        AuditLog.objects.create(
            action="raw_event.replay",
            actor="user:charlie",
            resource=f"raw_event:{i}," + ",".join(str(n) for n in range(40)),
            request_id=f"req-{i:04d}-" + "0123456789abcdef" * 4,
        )
    page.goto("/admin/ingest/rawevent/?triage=dlq")
    for column in ("error", "attempts"):
        assert page.locator("#result_list thead th", has_text=column).count() >= 1
    assert horizontal_overflow(page) == {"page": 0, "results": 0}
    screenshot(page, "dlq-list-1400")
    page.locator("#result_list tbody tr a").first.click()
    page.locator(".vf-traceback-box > summary").click()
    assert "RuntimeError" in page.locator("pre.vf-traceback").inner_text()
    screenshot(page, "dead-raw-event-traceback")
    page.goto("/admin/ops/auditlog/")
    assert page.locator("#result_list thead th", has_text="request id").count() == 1
    assert horizontal_overflow(page) == {"page": 0, "results": 0}
    screenshot(page, "audit-list-1400")

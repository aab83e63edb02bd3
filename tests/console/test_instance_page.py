"""The instance page answers at a glance: a waterfall with one bar per step attempt (retries,
backoffs, sleeps and waits visible, the current step marked), expandable steps with output,
error and a bounded traceback, and times in UTC with a machine-readable <time>."""

import re

from workflows.models import WorkflowInstance, WorkflowStep


def page(console, name, instance_id):
    instance = WorkflowInstance.objects.get(workflow_name=name, instance_id=instance_id)
    response = console.get(f"/admin/workflows/workflowinstance/{instance.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def bars(html, kind=None):
    return re.findall('class="vf-bar vf-' + (kind or r"\w+") + '"', html)


def test_a_retried_failing_step_draws_one_bar_per_attempt_and_the_backoffs(harness, console):
    harness.create("console-flaky", id="f1")
    harness.advance("10 seconds")
    harness.advance("10 seconds")
    html = page(console, "console-flaky", "f1")
    assert len(bars(html, "complete")) == 1  # prepare
    assert len(bars(html, "failed")) == 3  # call clinic: 1 attempt + 2 retries
    assert len(bars(html, "backoff")) == 2
    assert "call clinic attempt 1 failed" in html


def test_a_failed_step_shows_its_bounded_traceback_without_local_values(harness, console):
    harness.create("console-flaky", id="f2", params={"reading": "glucose=7.9 mmol/L"})
    harness.advance("10 seconds")
    harness.advance("10 seconds")
    step = WorkflowStep.objects.get(name="call clinic")
    assert "_fetch_marker" in step.error["traceback"]
    html = page(console, "console-flaky", "f2")
    assert 'class="vf-traceback"' in html and "in _fetch_marker" in html
    assert "glucose" not in step.error["traceback"]
    # the instance's own error stays {"name", "message"}: the step keeps the traceback
    assert set(WorkflowInstance.objects.get(instance_id="f2").error) == {"name", "message"}


def test_a_waiting_run_marks_its_current_step_and_draws_sleep_and_wait(harness, console):
    harness.create("console-approval", id="a1")
    harness.advance("1 minute")
    html = page(console, "console-approval", "a1")
    assert len(bars(html, "sleep")) == 1 and len(bars(html, "wait")) == 1
    assert 'class="vf-current"' in html and 'class="vf-now"' in html
    assert re.search(r'<details id="step-2"[^>]*data-current="1"', html)
    assert 'stroke-dasharray="3 2"' in html  # the wait is still pending


def test_a_finished_run_has_no_current_step_and_shows_outputs_as_json(harness, console):
    harness.create("console-approval", id="a2")
    harness.advance("1 minute")
    harness.send_event("console-approval", "a2", "approved", {"by": "dr who"})
    html = page(console, "console-approval", "a2")
    assert 'class="vf-current"' not in html
    assert "&quot;approved_by&quot;: &quot;dr who&quot;" in html  # json.dumps, not a repr


def test_times_are_utc_with_a_datetime_attribute_to_the_millisecond(harness, console):
    harness.create("console-many", id="m1", params={"steps": 2})
    harness.run_until_idle()
    html = page(console, "console-many", "m1")
    assert '<time datetime="2026-01-01T12:00:00' in html
    assert re.search(r">2026-01-01 12:00:00\.\d{3} UTC</time>", html)
    assert "ops/console.js" in html

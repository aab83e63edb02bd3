"""Work made due at once (create, event, resume, restart) is due by the database's clock.

On PostgreSQL the claim judges "is it due" by the server's clock, while times the process
writes come from runtime.now(): its wall clock plus the measured offset (workflows.dbclock),
which is off by the measurement's error (a few ms, more on a loaded machine). A due time "now"
taken from that clock could sit just ahead of the server's, so a tick right after an event
found nothing due (the flaky `logs --follow` test). Here the offset is set 2 s off, as a bad
measurement would leave it."""

from datetime import timedelta

import pytest

from tests.ops.test_idempotency import IS_POSTGRES
from workflows import runtime, services
from workflows.engine import tick
from workflows.selectors import instance_get

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.skipif(not IS_POSTGRES, reason="SQLite has one clock: nothing is measured"),
]


@pytest.fixture
def offset_off_by_two_seconds():
    def skew():
        runtime.set_database_offset(timedelta(seconds=2))

    yield skew
    runtime.set_database_offset(timedelta(0))


def run_now() -> int:
    return tick(max_instances=10, threaded=False)


def test_a_new_instance_an_event_a_resume_and_a_restart_are_due_at_once(
    db, offset_off_by_two_seconds
):
    offset_off_by_two_seconds()
    services.instance_create(workflow_name="wake-event", instance_id="e")
    assert run_now() == 1  # created: due now, runs until it waits for "go"
    offset_off_by_two_seconds()
    services.instance_send_event(
        instance=instance_get(workflow_name="wake-event", instance_id="e"), type="go"
    )
    assert run_now() == 1
    assert instance_get(workflow_name="wake-event", instance_id="e").status == "complete"

    services.instance_create(workflow_name="wake-event", instance_id="p")
    services.instance_pause(instance=instance_get(workflow_name="wake-event", instance_id="p"))
    offset_off_by_two_seconds()
    services.instance_resume(instance=instance_get(workflow_name="wake-event", instance_id="p"))
    assert run_now() == 1

    offset_off_by_two_seconds()
    services.instance_restart(instance=instance_get(workflow_name="wake-event", instance_id="e"))
    assert run_now() == 1
    assert instance_get(workflow_name="wake-event", instance_id="e").run_number == 2

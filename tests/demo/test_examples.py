"""The demo workflow that `make run` starts behaves as the console will show it."""

from datetime import UTC, datetime

import pytest

import demo.examples  # noqa: F401  (registers demo-onboarding)
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db


@pytest.fixture
def harness():
    with WorkflowHarness(start=datetime(2026, 7, 1, 9, 0, tzinfo=UTC)) as h:
        yield h


def test_demo_onboarding_takes_the_confirmed_goal(harness):
    harness.create("demo-onboarding", id="demo-1", params={"user": "demo"})
    harness.advance("21 seconds")
    assert harness.status("demo-onboarding", "demo-1")["status"] == "waiting"
    harness.send_event("demo-onboarding", "demo-1", "goal_confirmed", {"goal_steps": 10000})
    status = harness.status("demo-onboarding", "demo-1")
    assert status == {"status": "complete", "output": {"user": "demo", "goal_steps": 10000}}


def test_demo_onboarding_keeps_the_default_goal_when_nobody_confirms(harness):
    harness.create("demo-onboarding", id="demo-2")
    harness.advance("21 seconds")
    harness.advance("3 minutes")
    assert harness.status("demo-onboarding", "demo-2")["output"] == {
        "user": "demo",
        "goal_steps": 8000,
    }


def test_the_banners_send_event_still_works_ten_minutes_later(harness):
    # Seen: demo-1 stopped waiting after 2 minutes, so the command the banner printed failed
    # for anyone who read the banner, opened the console, and came back to the terminal.
    from demo.management.commands.rundemo import BANNER_INSTANCE, BANNER_WAIT, DEMO_USER

    params = {"user": DEMO_USER, "confirm_within": BANNER_WAIT}
    harness.create("demo-onboarding", id=BANNER_INSTANCE, params=params)
    harness.advance("10 minutes")
    assert harness.status("demo-onboarding", BANNER_INSTANCE)["status"] == "waiting"
    harness.send_event("demo-onboarding", BANNER_INSTANCE, "goal_confirmed", {"goal_steps": 10000})
    assert harness.status("demo-onboarding", BANNER_INSTANCE)["output"]["goal_steps"] == 10000


def test_the_demo_instances_are_the_demo_users_work(harness):
    from demo.management.commands.rundemo import DEMO_USER, Command
    from tests.factories import UserFactory
    from workflows.models import WorkflowInstance

    demo_user = UserFactory(username=DEMO_USER)
    Command().start_example_workflows()
    subjects = set(
        WorkflowInstance.objects.filter(workflow_name="demo-onboarding").values_list(
            "subject_id", flat=True
        )
    )
    assert subjects == {demo_user.pk}

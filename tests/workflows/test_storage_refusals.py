"""A value the database refuses at a step boundary (too long for its column, a NUL, a number out
of range) fails the instance at once with the database's error, instead of the run being claimed
again and again until it ends as a crash loop ("MaxRecoveryAttemptsExceeded … its runner died
each time")."""

import psycopg
import pytest
from django.db import DataError, IntegrityError, OperationalError

import tests.workflows.limits_workflows  # noqa: F401 - registers limit-refused
from tests.workflows.fault_processes import Runners, wait_for
from workflows import decisions, services
from workflows.decisions import StepState
from workflows.engine.storage_faults import StorageFault
from workflows.models import WorkflowInstance, WorkflowStep, WorkflowTask

# -- the classification (pure) -------------------------------------------------------------------


def wrapped(driver_error: Exception) -> DataError:
    """As Django raises it: its DataError with the driver's error as the cause."""
    error = DataError(str(driver_error))
    error.__cause__ = driver_error
    return error


def test_a_value_too_long_for_its_column_is_a_refused_value():
    exc = wrapped(psycopg.errors.StringDataRightTruncation("value too long for type varchar(64)"))
    error = decisions.refused_value(exc)
    assert error["name"] == "StringDataRightTruncation"
    assert "value too long for type varchar(64)" in error["message"]
    assert "refused" in error["message"]


def test_a_nul_that_the_driver_refuses_is_a_refused_value():
    exc = wrapped(psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"))
    assert decisions.refused_value(exc)["name"] == "DataError"


def test_a_number_out_of_range_is_a_refused_value():
    exc = psycopg.errors.NumericValueOutOfRange("integer out of range")
    assert decisions.refused_value(exc)["name"] == "NumericValueOutOfRange"


def test_the_refusal_never_quotes_the_refused_value():
    exc = psycopg.errors.UntranslatableCharacter(
        "unsupported Unicode escape sequence\nDETAIL: \\u0000 cannot be converted to text.\n"
        'CONTEXT: JSON data, line 1: {"secret":"TOPSECRET\\u0000'
    )
    error = decisions.refused_value(exc)
    assert "unsupported Unicode escape sequence" in error["message"]
    assert "TOPSECRET" not in error["message"]


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("server closed the connection unexpectedly"),
        psycopg.OperationalError("terminating connection"),
        IntegrityError("duplicate key value violates unique constraint"),
        StorageFault("OperationalError: connection lost"),
        ValueError("a bug"),
    ],
)
def test_connection_faults_constraint_violations_and_bugs_are_not_refused_values(exc):
    assert decisions.refused_value(exc) is None


def steps_after_refusal(*, strict=False, mutated=False) -> list[tuple]:
    staged = [
        StepState(name="done", type="do", status="complete", result="x"),
        StepState(name="next", type="do", status="running", attempts=1),
        StepState(name="nap", type="sleep", status="complete"),
    ]
    steps = decisions.refused_boundary_steps(
        staged, REFUSAL, now=None, strict=strict, mutated=mutated
    )
    return [(s.name, s.status, s.result, s.error) for s in steps]


REFUSAL = {"name": "DataError", "message": "refused"}


def test_a_refused_boundary_keeps_finished_steps_and_errors_the_one_starting():
    assert steps_after_refusal() == [
        ("done", "complete", "x", None),
        ("next", "errored", None, REFUSAL),
        ("nap", "complete", None, None),
    ]


def test_a_completed_step_whose_own_writes_were_refused_is_errored():
    assert steps_after_refusal(mutated=True)[0] == ("done", "errored", None, REFUSAL)


def test_when_the_failure_is_refused_too_every_do_step_is_errored():
    assert [s[1] for s in steps_after_refusal(strict=True)] == ["errored", "errored", "complete"]


# -- a step's exception text is stored whatever it holds (both databases) ------------------------


def test_a_step_error_with_a_nul_in_its_message_is_stored_escaped_and_retried(harness):
    from workflows import workflow

    @workflow(name="refused-nul-error")
    def nul_error(event, step):
        def parse():
            raise ValueError("bad byte \x00 in upload")

        step.do("parse", parse, retries={"limit": 1, "delay": "1 second"})

    harness.create("refused-nul-error", "n")
    row = WorkflowStep.objects.get(name="parse")
    assert (row.status, row.error["message"]) == ("retrying", "bad byte \\x00 in upload")
    harness.advance("1 second")
    assert harness.status("refused-nul-error", "n")["status"] == "errored"


# -- the engine on PostgreSQL --------------------------------------------------------------------


def assert_failed_at_once(instance: WorkflowInstance, name: str) -> None:
    assert instance.status == "errored"
    assert instance.error["name"] == name, instance.error
    assert "refused" in instance.error["message"]
    assert not WorkflowTask.objects.filter(instance=instance).exists()


@pytest.mark.postgres_only
def test_a_log_category_the_column_refuses_fails_the_instance_at_once(harness, settings):
    settings.WORKFLOWS_LOG_CATEGORY_MAX = 200  # wider than the column: the database refuses
    harness.create("limit-refused", "cat", {"category": "c" * 100}, run=False)
    assert harness.tick() == "errored"
    assert harness.tick() is None  # nothing is claimed again
    instance = harness.instance("limit-refused", "cat")
    assert_failed_at_once(instance, "StringDataRightTruncation")
    assert "character varying(64)" in instance.error["message"]
    assert WorkflowStep.objects.get(instance=instance, name="before").status == "complete"


@pytest.mark.postgres_only
def test_a_step_write_the_database_refuses_fails_the_instance_at_once(harness):
    harness.create("limit-refused", "mut", {"action": "a" * 101}, run=False)
    assert harness.tick() == "errored"
    instance = harness.instance("limit-refused", "mut")
    assert_failed_at_once(instance, "StringDataRightTruncation")
    write = WorkflowStep.objects.get(instance=instance, name="write")
    assert (write.status, write.result, write.error) == ("errored", None, instance.error)


@pytest.mark.postgres_only
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_refused_boundary_fails_the_instance_once_with_a_real_runner(tmp_path):
    """The reported case: a 100-character log category on PostgreSQL. Before, the run was
    claimed 10 times and ended MaxRecoveryAttemptsExceeded; now the first claim fails it."""
    runners = Runners(tmp_path)
    services.instance_create(
        workflow_name="limit-refused", instance_id="real", params={"category": "c" * 100}
    )
    env = {
        "WORKFLOWS_MODULES": "tests.workflows.limits_workflows",
        "WORKFLOWS_LOG_CATEGORY_MAX": "200",
    }
    try:
        runners.start(lease=1, env=env)
        wait_for(
            lambda: WorkflowInstance.objects.get(instance_id="real").status == "errored",
            what="the instance to be errored",
        )
    finally:
        runners.stop_all()
    instance = WorkflowInstance.objects.get(instance_id="real")
    assert_failed_at_once(instance, "StringDataRightTruncation")
    logs = (tmp_path / "runner-0.log").read_text()
    assert "runner failed on" not in logs  # never counted as a crashed runner

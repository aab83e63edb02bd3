"""Python log lines written while a workflow instance runs name it (LOG_FORMAT=json shows them)."""

import logging

import pytest

from ops.request_id import RequestIdLogFilter
from workflows import workflow


@workflow(name="h11-logs")
def logs(event, step):
    return step.do("say", lambda: logging.getLogger("app.steps").info("inside a step") or 1)


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.addFilter(RequestIdLogFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def records():
    handler = Records()
    logging.getLogger().addHandler(handler)
    yield handler.records
    logging.getLogger().removeHandler(handler)


def test_step_log_lines_carry_the_workflow_ids(harness, records):
    harness.create("h11-logs", id="l-1")
    (line,) = [r for r in records if r.getMessage() == "inside a step"]
    assert (line.workflow, line.workflow_instance_id, line.workflow_run) == ("h11-logs", "l-1", 1)

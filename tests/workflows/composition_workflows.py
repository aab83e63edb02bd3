"""Workflows for the composition tests (issue 12): parallel, race, loop, child workflows,
restart from a step. Imported by the tests and loaded by runner subprocesses through
WORKFLOWS_MODULES. Side effects go to params["trace"] (one line per callback execution)."""

from tests.workflows.sample_workflows import _trace
from workflows import workflow


@workflow(name="five-steps")
def five_steps(event, step):
    """params: {"trace": path}; steps s1..s5, each returning its number."""
    params = event.payload or {}
    out = []
    for i in range(1, 6):

        def run(i=i):
            _trace(params.get("trace"), f"s{i}")
            return i

        out.append(step.do(f"s{i}", run))
    return out

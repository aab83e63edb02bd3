"""A workflows policy (WORKFLOWS_POLICIES "events") that keeps graph runs' human nodes answered
through graphs.answers only, where who may answer, four-eyes and one answer per node hold."""

from graphs.spec import GRAPH_RUN
from ops.errors import ApiError, ErrorCode


def answers_through_graphs(request, *, operation, workflow_name=None, instance_id=None):
    """Refuse engine events sent to a graph-run instance by the workflow routes or console:
    every event a graph run waits for is a person's answer to one of its human nodes."""
    if workflow_name == GRAPH_RUN:
        raise ApiError(
            403,
            ErrorCode.PERMISSION_DENIED,
            "Graph runs' human nodes are answered with POST /v1/graphs/runs/{id}/events (or "
            "the graphs console), which checks who may answer.",
        )
    return True

"""The console front page's "waiting for a person" panel: graph runs whose human node waits for
an answer and code workflows waiting for an event, oldest first. Only open instances are looked
at (they are the ones with a task row, a small table), never the finished history."""

from graphs.models import GraphToken, TokenStatus
from graphs.spec import GRAPH_RUN as GRAPH_WORKFLOW
from workflows import runtime
from workflows.models import StepStatus, StepType, WorkflowStep

LIMIT = 20  # per kind: the panel lists the oldest; the lists behind the links have the rest


def waiting_for_a_person(*, limit: int = LIMIT) -> list[dict]:
    """[{"kind", "what", "waits_for", "since", "age", "url"}] oldest first."""
    from django.urls import reverse

    now = runtime.now()
    rows = []
    tokens = (
        GraphToken.objects.filter(status=TokenStatus.EXECUTING, run__instance__task__isnull=False)
        .select_related("run__definition", "run__instance")
        .order_by("updated_at")
    )
    for token in tokens[: limit * 5]:  # executing tokens of open runs; humans among them
        run = token.run
        if token.engine_run != run.instance.run_number:
            continue
        nodes = {n.get("ref"): n for n in run.definition.document.get("nodes", [])}
        action = nodes.get(token.node_ref, {}).get("action", {})
        if action.get("kind") != "human":
            continue
        rows.append(
            {
                "kind": "graph approval",
                "what": f"{run.binding_name or run.definition.name} / {run.run_id}",
                "waits_for": f"{token.node_ref} ({action.get('event_type', '')})",
                "since": token.updated_at,
                "url": reverse("admin:graphs_graphrun_change", args=[run.pk]),
            }
        )
        if len(rows) >= limit:
            break
    steps = (
        WorkflowStep.objects.filter(
            type=StepType.WAIT_FOR_EVENT,
            status=StepStatus.WAITING,
            instance__task__isnull=False,
        )
        .exclude(instance__workflow_name=GRAPH_WORKFLOW)  # graph runs are listed above
        .select_related("instance")
        .order_by("started_at")
    )
    for step in steps[:limit]:
        instance = step.instance
        if step.run_number != instance.run_number:
            continue
        rows.append(
            {
                "kind": "workflow event",
                "what": f"{instance.workflow_name} / {instance.instance_id}",
                "waits_for": f"{step.name} ({step.wait_event_type})",
                "since": step.started_at,
                "url": reverse("admin:workflows_workflowinstance_change", args=[instance.pk]),
            }
        )
    rows.sort(key=lambda r: r["since"])
    for row in rows:
        row["age"] = _age(now - row["since"])
    return rows


def _age(delta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"

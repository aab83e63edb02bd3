"""The interpreter workflow `graph-run`: one graph run = one engine instance (graphs/executor.py
runs it; docs/graphs/README.md).

Three versions are registered; each stays so that runs started on it replay the step sequence
they recorded (docs/workflows/faults.md, "keep old versions registered"):
- v3 (new runs): v2, and a human node also takes an answer naming its token
  (POST /v1/graphs/runs/{id}/events with "token"), so one of several waiting branches can be
  answered;
- v2: each fan-out's branches run as lanes of one step.parallel (graphs/lanes.py);
- v1 — the same function as before v2 existed — runs them one after another in token order.
"""

from django.conf import settings

from graphs import decisions, services, spec
from graphs.executor import Executor, to_ms
from graphs.lanes import LaneExecutor
from graphs.models import GraphRun
from graphs.services import GRAPH_WORKFLOW
from workflows import limits, workflow
from workflows.models import WorkflowInstance


# Registered first, so a deployment with no active-version row starts new runs on it (migration
# graphs 0004 points an existing row at it).
@workflow(name=GRAPH_WORKFLOW, version=3)
def graph_run_v3(event, step):
    return LaneExecutor(step, *load(event), targeted=True).run()


@workflow(name=GRAPH_WORKFLOW, version=2)
def graph_run_v2(event, step):
    return LaneExecutor(step, *load(event)).run()


def load(event) -> tuple:
    """(run, graph, initial state) of the run this engine instance executes. A child graph
    (a `workflow` node with `binding`) has no run row until it first runs."""
    run = (
        GraphRun.objects.select_related("definition", "instance")
        .filter(run_id=event.instance_id)
        .first()
    )
    if run is None:
        instance = WorkflowInstance.objects.get(
            workflow_name=GRAPH_WORKFLOW, instance_id=event.instance_id
        )
        run = services.run_adopt(instance=instance)
    graph = spec.parse(run.definition.document)  # published: immutable, so replay-safe
    params = event.payload or {}
    state = decisions.start(
        graph,
        params.get("input"),
        now_ms=to_ms(event.timestamp),
        # Fixed at run creation (services.run_params); runs created before it take the setting.
        max_fan_out=params.get("max_fan_out") or settings.GRAPHS_MAX_FAN_OUT,
        max_steps=limits.steps_per_run_max(),
    )
    return run, graph, state


# Version 1, its source unchanged (the code fingerprint of running v1 instances stays equal).
@workflow(name=GRAPH_WORKFLOW)
def graph_run(event, step):
    run = GraphRun.objects.select_related("definition", "instance").get(run_id=event.instance_id)
    graph = spec.parse(run.definition.document)  # published: immutable, so replay-safe
    state = decisions.start(
        graph, (event.payload or {}).get("input"), now_ms=to_ms(event.timestamp)
    )
    return Executor(step, run, graph, state).run()

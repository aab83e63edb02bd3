"""Reads on graph workflows, shared by the API, the console and the commands."""

from graphs.models import GraphDefinition, GraphRun
from workflows.selectors import instance_details


def definitions(*, name: str | None = None, tag: str | None = None):
    rows = GraphDefinition.objects.all()
    if name:
        rows = rows.filter(name=name)
    return rows.filter(tag_rows__name=tag) if tag else rows


def definition_body(d: GraphDefinition) -> dict:
    return {
        "name": d.name,
        "version": d.version,
        "status": d.status,
        "description": d.description,
        "checksum": d.checksum,
        "created_at": d.created_at,
        "published_at": d.published_at,
        "tags": list(d.document.get("tags") or []),
        "document": {**d.document, "version": d.version},
    }


def runs(*, binding: str | None = None, tag: str | None = None):
    rows = GraphRun.objects.select_related("definition", "instance")
    if binding:
        rows = rows.filter(binding_name=binding)
    return rows.filter(definition__tag_rows__name=tag) if tag else rows


def run_summary(run: GraphRun) -> dict:
    return {
        "id": run.run_id,
        "binding": run.binding_name,
        "definition": run.definition.name,
        "version": run.definition.version,
        "status": run.instance.status,
        "created_at": run.created_at,
    }


def current_tokens(run: GraphRun):
    """Tokens of the engine's current run of this graph run (a restart starts a new set)."""
    return run.tokens.filter(engine_run=run.instance.run_number).order_by("sequence")


def waiting_human_tokens(run: GraphRun, *, event_type: str | None = None) -> dict[str, str]:
    """{token path: event type} of the run's human nodes waiting for their answer (optionally
    only those waiting for `event_type`), in token order."""
    nodes = {n.get("ref"): n for n in run.definition.document.get("nodes", [])}
    found = {}
    for path, ref in (
        current_tokens(run).filter(status="executing").values_list("path_id", "node_ref")
    ):
        action = nodes.get(ref, {}).get("action", {})
        if action.get("kind") == "human" and event_type in (None, action.get("event_type")):
            found[path] = action.get("event_type", "")
    return found


def answer_body(a) -> dict:
    """An accepted answer as the API and 409 already_answered name it."""
    return {
        "token": a.token_path,
        "node": a.node_ref,
        "type": a.event_type,
        "decision": a.decision,
        "by": a.actor,
        "at": a.created_at.isoformat(),
    }


def accepted_answers(run: GraphRun) -> dict:
    """{token path: GraphAnswer} of the engine's current run: answers accepted so far."""
    return {a.token_path: a for a in run.answers.filter(engine_run=run.instance.run_number)}


def current_events(run: GraphRun):
    return run.run_events.filter(engine_run=run.instance.run_number)


def token_body(t) -> dict:
    return {
        "path_id": t.path_id,
        "node": t.node_ref,
        "status": t.status,
        "parent": t.parent_path,
        "fan_out": t.fan_out,
        "branch_index": t.branch_index,
        "branch_total": t.branch_total,
        "output": t.output,
        "error": t.error,
    }


def run_detail(run: GraphRun) -> dict:
    details = instance_details(run.instance)
    body = {
        **run_summary(run),
        "status": details["status"],
        "engine_run": run.instance.run_number,
        "context": run.context,
    }
    for key in ("output", "error"):
        if key in details:
            body[key] = details[key]
    body["tokens"] = [token_body(t) for t in current_tokens(run)]
    return body

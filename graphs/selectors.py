"""Reads on graph workflows, shared by the API, the console and the commands."""

from graphs.models import GraphDefinition, GraphRun
from workflows.selectors import instance_details


def definitions(*, name: str | None = None):
    rows = GraphDefinition.objects.all()
    return rows.filter(name=name) if name else rows


def definition_body(d: GraphDefinition) -> dict:
    return {
        "name": d.name,
        "version": d.version,
        "status": d.status,
        "description": d.description,
        "checksum": d.checksum,
        "created_at": d.created_at,
        "published_at": d.published_at,
        "document": {**d.document, "version": d.version},
    }


def runs(*, binding: str | None = None):
    rows = GraphRun.objects.select_related("definition", "instance")
    return rows.filter(binding_name=binding) if binding else rows


def run_summary(run: GraphRun) -> dict:
    return {
        "id": run.run_id,
        "binding": run.binding_name,
        "definition": run.definition.name,
        "version": run.definition.version,
        "status": run.instance.status,
        "created_at": run.created_at,
    }


def run_detail(run: GraphRun) -> dict:
    from graphs.http.serializers import TokenSerializer

    details = instance_details(run.instance)
    body = {**run_summary(run), "status": details["status"], "context": run.context}
    for key in ("output", "error"):
        if key in details:
            body[key] = details[key]
    body["tokens"] = TokenSerializer(run.tokens.order_by("sequence"), many=True).data
    return body

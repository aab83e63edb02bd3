"""Reading and writing definition files (JSON or YAML) for `manage.py graphs import/export`."""

import json
from pathlib import Path

import yaml

from graphs import services
from graphs.errors import InvalidGraph
from graphs.models import GraphBinding, GraphDefinition


def load_file(path: str) -> dict:
    """The file's document; ValueError (the command's error) when it is not valid JSON/YAML.
    Whether it is an object is checked with the rest of the document (InvalidGraph)."""
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path} is not valid YAML: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def import_document(
    document: dict, *, publish: bool, binding: str | None, actor: str
) -> GraphDefinition:
    """Create a draft from `document`; when its content equals the latest version's, reuse that
    version instead (so importing the same file twice creates nothing new)."""
    if not isinstance(document, dict):
        raise InvalidGraph("a graph definition must be a JSON object")
    document = {k: v for k, v in document.items() if k != "version"}
    latest = GraphDefinition.objects.filter(name=document.get("name")).order_by("-version").first()
    if latest is not None and latest.checksum == services.checksum(document):
        definition = latest
    else:
        definition = services.definition_create(document=document, actor=actor)
    if publish:
        definition = services.definition_publish(
            name=definition.name, version=definition.version, actor=actor
        )
    if binding and not GraphBinding.objects.filter(name=binding).exists():
        services.binding_create(name=binding, definition=definition.name, actor=actor)
    return definition


def export_document(*, name: str, version: int | None) -> dict:
    if version is None:
        found = GraphDefinition.objects.filter(name=name).order_by("-version").first()
        if found is None:
            from graphs.errors import DefinitionNotFound

            raise DefinitionNotFound(f"no graph definition named {name!r}")
    else:
        found = services.definition_get(name=name, version=version)
    return {**found.document, "version": found.version}

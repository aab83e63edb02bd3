"""Writes on graph workflows: definitions (draft → published), bindings (pin, disable,
enable, approvers), runs (of the binding's version, or a canary of an explicit one). Answers to
human nodes are graphs/answers.py's.

Keyword-only; refusals are graphs.errors.GraphError (or the engine's WorkflowError) raised
before anything is written. Operator mutations write an audit row when `actor` or `request` is
given (the API and the console always give one).
"""

import hashlib
import json

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import Max

from graphs import schemas, spec
from graphs.errors import (
    BindingDisabled,
    BindingExists,
    BindingNotFound,
    DefinitionNotFound,
    DefinitionPublished,
    GroupNotFound,
    InvalidGraph,
    InvalidInput,
    NoPublishedVersion,
)
from graphs.models import (
    DefinitionStatus,
    GraphBinding,
    GraphDefinition,
    GraphDefinitionTag,
    GraphRun,
)
from ops.services import actor_for, audit_log_write
from workflows import limits, runtime
from workflows import services as engine

GRAPH_WORKFLOW = spec.GRAPH_RUN  # graphs/workflows.py registers it


def _audit(action: str, *, resource: str, actor=None, request=None, metadata=None) -> None:
    if actor is not None or request is not None:
        audit_log_write(
            action=action,
            resource=resource,
            actor=actor,
            request=request,
            metadata=metadata,
            idempotency_key=getattr(request, "idempotency_key", "") or "",
        )


def checksum(document: dict) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _shape(document) -> dict:
    """A draft may be incomplete, but it is an object with a valid name and JSON content."""
    if not isinstance(document, dict):
        raise InvalidGraph("a graph definition must be a JSON object")
    name = document.get("name")
    if not isinstance(name, str) or not spec.NAME.match(name):
        raise InvalidGraph(f"name {name!r} must match {spec.NAME.pattern}", field="name")
    limits.check_json(document, what="definition")
    spec.check_tags(document.get("tags"))  # stored as rows for list filters, even in a draft
    document = {k: v for k, v in document.items() if k != "version"}  # the server numbers
    return document


def _fields(definition: GraphDefinition, document: dict) -> None:
    definition.document = document
    definition.description = str(document.get("description") or "")
    definition.input_schema = document.get("input_schema")
    definition.context_schema = document.get("context_schema")
    definition.initial_node = str(document.get("initial_node") or "")[:64]
    definition.timeout = str(document.get("timeout") or "")[:64]
    definition.on_timeout = str(document.get("on_timeout") or "fail")[:16]
    definition.checksum = checksum(document)


def _store_tags(definition: GraphDefinition) -> None:
    """The tag rows of a saved definition, as its document says (drafts may change them)."""
    definition.tag_rows.all().delete()
    GraphDefinitionTag.objects.bulk_create(
        GraphDefinitionTag(definition=definition, name=tag)
        for tag in definition.document.get("tags") or []
    )


def definition_create(*, document, actor=None, request=None) -> GraphDefinition:
    """A new draft: version = the name's highest version + 1."""
    document = _shape(document)
    name = document["name"]
    for _ in range(3):  # two creates racing for the same number: the loser takes the next
        try:
            with transaction.atomic():
                latest = GraphDefinition.objects.filter(name=name).aggregate(v=Max("version"))["v"]
                now = runtime.now()
                definition = GraphDefinition(
                    name=name, version=(latest or 0) + 1, created_at=now, updated_at=now
                )
                _fields(definition, document)
                definition.save(force_insert=True)
                _store_tags(definition)
                _audit(
                    "graph_definition.create",
                    resource=f"graph:{name}/v{definition.version}",
                    actor=actor,
                    request=request,
                )
                return definition
        except IntegrityError:
            continue
    raise InvalidGraph(f"could not number a new version of {name!r}; retry")


def definition_get(*, name: str, version: int) -> GraphDefinition:
    found = GraphDefinition.objects.filter(name=name, version=version).first()
    if found is None:
        raise DefinitionNotFound(f"no graph definition {name!r} version {version}")
    return found


def definition_update(
    *, name: str, version: int, document, actor=None, request=None
) -> GraphDefinition:
    document = _shape(document)
    if document["name"] != name:
        raise InvalidGraph(f"the document's name must stay {name!r}", field="name")
    with transaction.atomic():
        definition = (
            GraphDefinition.objects.select_for_update().filter(name=name, version=version).first()
        )
        if definition is None:
            raise DefinitionNotFound(f"no graph definition {name!r} version {version}")
        if definition.status == DefinitionStatus.PUBLISHED:
            raise DefinitionPublished(f"{name!r} v{version} is published and cannot change")
        _fields(definition, document)
        definition.updated_at = runtime.now()
        definition.save()
        _store_tags(definition)
        _audit(
            "graph_definition.update",
            resource=f"graph:{name}/v{version}",
            actor=actor,
            request=request,
        )
    return definition


def definition_publish(*, name: str, version: int, actor=None, request=None) -> GraphDefinition:
    """Validate the draft fully (InvalidGraph naming the ref) and freeze it."""
    with transaction.atomic():
        definition = (
            GraphDefinition.objects.select_for_update().filter(name=name, version=version).first()
        )
        if definition is None:
            raise DefinitionNotFound(f"no graph definition {name!r} version {version}")
        if definition.status == DefinitionStatus.PUBLISHED:
            return definition  # publishing twice changes nothing
        spec.parse(definition.document, publishing=True)
        now = runtime.now()
        definition.status, definition.published_at, definition.updated_at = (
            DefinitionStatus.PUBLISHED,
            now,
            now,
        )
        definition.checksum = checksum(definition.document)
        definition.save()
        _audit(
            "graph_definition.publish",
            resource=f"graph:{name}/v{version}",
            actor=actor,
            request=request,
            metadata={"checksum": definition.checksum},
        )
    return definition


def latest_published(name: str) -> GraphDefinition | None:
    return (
        GraphDefinition.objects.filter(name=name, status=DefinitionStatus.PUBLISHED)
        .order_by("-version")
        .first()
    )


def _check_pin(definition_name: str, version: int | None) -> None:
    if not GraphDefinition.objects.filter(name=definition_name).exists():
        raise DefinitionNotFound(f"no graph definition named {definition_name!r}")
    if version is None:
        return
    found = GraphDefinition.objects.filter(name=definition_name, version=version).first()
    if found is None:
        raise DefinitionNotFound(f"no graph definition {definition_name!r} version {version}")
    if found.status != DefinitionStatus.PUBLISHED:
        raise NoPublishedVersion(f"{definition_name!r} v{version} is a draft; publish it first")


def _group(name: str | None) -> Group | None:
    if name is None:
        return None
    found = Group.objects.filter(name=name).first()
    if found is None:
        raise GroupNotFound(f"no group named {name!r}: create it in the console first")
    return found


def binding_create(
    *,
    name: str,
    definition: str,
    pinned_version: int | None = None,
    approvers: str | None = None,
    actor=None,
    request=None,
) -> GraphBinding:
    """A new binding; `approvers` names the group whose (staff) members answer its human
    nodes, besides the global approvers (graphs.answers)."""
    if not isinstance(name, str) or not spec.NAME.match(name):
        raise InvalidGraph(f"binding name {name!r} must match {spec.NAME.pattern}", field="name")
    _check_pin(definition, pinned_version)
    group = _group(approvers)
    now = runtime.now()
    try:
        with transaction.atomic():
            binding = GraphBinding.objects.create(
                name=name,
                definition_name=definition,
                pinned_version=pinned_version,
                approvers=group,
                created_at=now,
                updated_at=now,
            )
            _audit(
                "graph_binding.create",
                resource=f"graph_binding:{name}",
                actor=actor,
                request=request,
                metadata={
                    "definition": definition,
                    "pinned_version": pinned_version,
                    **({"approvers": approvers} if approvers is not None else {}),
                },
            )
    except IntegrityError:
        raise BindingExists(f"a binding named {name!r} already exists") from None
    return binding


def binding_get(*, name: str) -> GraphBinding:
    found = GraphBinding.objects.filter(name=name).first()
    if found is None:
        raise BindingNotFound(f"no graph binding named {name!r}")
    return found


def binding_pin(*, name: str, version: int | None, actor=None, request=None) -> GraphBinding:
    """Pin a published version (rollback = pin an older one), or None to follow the latest."""
    with transaction.atomic():
        binding = GraphBinding.objects.select_for_update().filter(name=name).first()
        if binding is None:
            raise BindingNotFound(f"no graph binding named {name!r}")
        _check_pin(binding.definition_name, version)
        previous = binding.pinned_version
        binding.pinned_version, binding.updated_at = version, runtime.now()
        binding.save(update_fields=["pinned_version", "updated_at"])
        audit_log_write(
            action="graph_binding.pin",
            resource=f"graph_binding:{name}",
            actor=actor if actor is not None or request is not None else "system",
            request=request,
            metadata={"from": previous, "to": version},
            idempotency_key=getattr(request, "idempotency_key", "") or "",
        )
    return binding


def binding_set_enabled(*, name: str, enabled: bool, actor=None, request=None) -> GraphBinding:
    """Disable a binding (new runs are refused with 409 disabled; running ones go on) or
    enable it again. Always audited, with the actor."""
    with transaction.atomic():
        binding = GraphBinding.objects.select_for_update().filter(name=name).first()
        if binding is None:
            raise BindingNotFound(f"no graph binding named {name!r}")
        changed = binding.enabled != enabled
        if changed:
            binding.enabled, binding.updated_at = enabled, runtime.now()
            binding.save(update_fields=["enabled", "updated_at"])
        audit_log_write(
            action="graph_binding.enable" if enabled else "graph_binding.disable",
            resource=f"graph_binding:{name}",
            actor=actor if actor is not None or request is not None else "system",
            request=request,
            metadata={"changed": changed},
            idempotency_key=getattr(request, "idempotency_key", "") or "",
        )
    return binding


def binding_set_approvers(
    *, name: str, group: str | None, actor=None, request=None
) -> GraphBinding:
    """Name the group whose staff members answer the binding's human nodes (None: only the
    global approvers). Always audited, with the actor and the change."""
    found = _group(group)
    with transaction.atomic():
        binding = GraphBinding.objects.select_for_update().filter(name=name).first()
        if binding is None:
            raise BindingNotFound(f"no graph binding named {name!r}")
        previous = binding.approvers.name if binding.approvers_id else None
        binding.approvers, binding.updated_at = found, runtime.now()
        binding.save(update_fields=["approvers", "updated_at"])
        audit_log_write(
            action="graph_binding.approvers",
            resource=f"graph_binding:{name}",
            actor=actor if actor is not None or request is not None else "system",
            request=request,
            metadata={"from": previous, "to": group},
            idempotency_key=getattr(request, "idempotency_key", "") or "",
        )
    return binding


def _enabled(binding: GraphBinding) -> GraphBinding:
    if not binding.enabled:
        raise BindingDisabled(
            f"graph binding {binding.name!r} is disabled: new runs are refused (runs already "
            "started go on); enable it to start runs again"
        )
    return binding


def _version_of(binding: GraphBinding, version: int | None) -> GraphDefinition:
    """The binding's current definition, or (a canary) the published `version` of its
    definition, whatever the binding points at."""
    if version is None:
        return binding_definition(binding)
    found = definition_get(name=binding.definition_name, version=version)
    if found.status != DefinitionStatus.PUBLISHED:
        raise NoPublishedVersion(f"{found.name!r} v{version} is a draft; publish it first")
    return found


def binding_definition(binding: GraphBinding) -> GraphDefinition:
    if binding.pinned_version is not None:
        return definition_get(name=binding.definition_name, version=binding.pinned_version)
    found = latest_published(binding.definition_name)
    if found is None:
        raise NoPublishedVersion(f"{binding.definition_name!r} has no published version")
    return found


def input_problems(definition: GraphDefinition, run_input) -> list[dict]:
    """What is wrong with `run_input` for `definition`. Its schemas' references are checked
    first: a definition published before they were checked may hold one that leaves the
    schema or loops (InvalidGraph, 400), which must never be fetched or followed forever."""
    for field in ("input_schema", "context_schema", "output_schema"):
        if isinstance(definition.document.get(field), dict):
            schemas.check_refs(definition.document[field], field)
    return schemas.problems(definition.input_schema, run_input, field="input_schema")


def run_params(definition: GraphDefinition, run_input, **extra) -> dict:
    """The engine params of a graph run. The fan-out maximum is fixed when the run starts, so
    a replay decides as the first execution did even if the setting changes meanwhile."""
    return {
        "input": run_input,
        "definition": f"{definition.name}/v{definition.version}",
        "max_fan_out": settings.GRAPHS_MAX_FAN_OUT,
        **extra,
    }


def run_create(
    *,
    binding_name: str,
    run_input=None,
    run_id: str | None = None,
    version: int | None = None,
    subject=None,
    actor=None,
    request=None,
) -> GraphRun:
    """Start a run of the binding's current version — or of `version` (a canary, beside the
    binding's pointer, which stays as it is): an engine instance of `graph-run` and its
    GraphRun row, in one transaction. A disabled binding is 409 disabled; input failing the
    input_schema is 400 invalid_input. `subject`: the user the run is about (a user or their
    pk), on the run and its instance: a wipe of that user deletes both."""
    binding = _enabled(binding_get(name=binding_name))
    definition = _version_of(binding, version)
    problems = input_problems(definition, run_input)
    if problems:
        raise InvalidInput(
            f"input does not match the input_schema of {definition.name!r} "
            f"v{definition.version}: {problems[0]['path']}: {problems[0]['message']}",
            errors=problems,
        )
    with transaction.atomic():
        instance = engine.instance_create(
            workflow_name=GRAPH_WORKFLOW,
            instance_id=run_id,
            params=run_params(definition, run_input),
            subject=subject,
        )
        now = runtime.now()
        run = GraphRun.objects.create(
            run_id=instance.instance_id,
            instance=instance,
            definition=definition,
            binding=binding,
            binding_name=binding.name,
            context={"input": run_input},
            started_by=actor or actor_for(request),
            subject_id=instance.subject_id,
            created_at=now,
            updated_at=now,
        )
        _audit(
            "graph_run.create",
            resource=f"graph_run:{run.run_id}",
            actor=actor,
            request=request,
            metadata={
                "binding": binding.name,
                "version": definition.version,
                **({"canary": True} if version is not None else {}),
            },
        )
    return run


def child_run_params(*, binding_name: str, run_input) -> dict:
    """What a `workflow` node with `binding` starts: the engine params of a graph-run child
    (the binding's current version, fixed now; the input checked like run_create's)."""
    binding = _enabled(binding_get(name=binding_name))
    definition = binding_definition(binding)
    problems = input_problems(definition, run_input)
    if problems:
        raise InvalidInput(
            f"input does not match the input_schema of {definition.name!r} "
            f"v{definition.version}: {problems[0]['path']}: {problems[0]['message']}",
            errors=problems,
        )
    return run_params(definition, run_input, binding=binding.name)


def run_adopt(*, instance) -> GraphRun:
    """The run row of a graph-run instance started as a child (by step.run_workflow, from
    child_run_params): created the first time the instance runs, found afterwards."""
    params = instance.params or {}
    name, _, version = str(params.get("definition", "")).rpartition("/v")
    definition = definition_get(name=name, version=int(version or 0))
    binding = GraphBinding.objects.filter(name=params.get("binding") or "").first()
    # A child run was started by whoever started its parent: four-eyes holds through it.
    parent = instance.parent_id and GraphRun.objects.filter(instance_id=instance.parent_id).first()
    now = runtime.now()
    run, _ = GraphRun.objects.get_or_create(
        run_id=instance.instance_id,
        defaults={
            "instance": instance,
            "definition": definition,
            "binding": binding,
            "binding_name": binding.name if binding else "",
            "context": {"input": params.get("input")},
            "started_by": parent.started_by if parent else "",
            # The engine gave the child instance its parent's subject.
            "subject_id": instance.subject_id,
            "created_at": now,
            "updated_at": now,
        },
    )
    return run


def run_get(*, run_id: str) -> GraphRun:
    from graphs.errors import RunNotFound

    found = GraphRun.objects.select_related("definition", "instance").filter(run_id=run_id).first()
    if found is None:
        raise RunNotFound(f"no graph run {run_id!r}")
    return found

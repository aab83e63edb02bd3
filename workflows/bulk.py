"""Bulk operator actions on workflow instances chosen by a filter (ops.bulk runs them as tracked
jobs): the filter's vocabulary, the rows it matches, and what one chunk does.

A filter is `{"workflow": name, "status": [...], "version": n, "since": iso, "until": iso,
"newer_than": "1h", "label": ["key:value", ...]}`; `workflow` is required. since/until bound
`created_at`; `newer_than` is turned into an absolute `since` when the job is asked for, so the
stored filter means the same rows however long the job takes. Only instances whose status the
action applies to (workflows.decisions) are matched.
"""

from datetime import UTC

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from ops import bulk
from ops.durations import parse_timedelta
from ops.errors import ApiError
from workflows import decisions, labels, runtime, selectors, services
from workflows.errors import InvalidBulkFilter
from workflows.models import Status, WorkflowInstance

BULK_ACTIONS = {action: f"workflow_instances.{action}" for action in decisions.OPERATOR_ACTIONS}
SERVICES = {
    "pause": services.instance_pause,
    "resume": services.instance_resume,
    "terminate": services.instance_terminate,
    "restart": services.instance_restart,
}
FILTER_KEYS = ("workflow", "status", "version", "since", "until", "newer_than", "label")


def _moment(raw, key: str) -> str:
    value = parse_datetime(str(raw)) if raw else None
    if value is None:
        raise InvalidBulkFilter(f"{key} must be an ISO date-time, got {raw!r}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def _as_list(raw) -> list[str]:
    if raw in (None, ""):
        return []
    return [str(v) for v in (raw if isinstance(raw, list | tuple) else [raw]) if str(v)]


def bulk_filters_clean(raw: dict) -> dict:
    """The filter, validated and made absolute (InvalidBulkFilter: 400 invalid_filter)."""
    if not isinstance(raw, dict):
        raise InvalidBulkFilter("filter must be an object")
    unknown = set(raw) - set(FILTER_KEYS)
    if unknown:
        raise InvalidBulkFilter(f"unknown filter key(s): {sorted(unknown)}")
    if not raw.get("workflow") or not isinstance(raw["workflow"], str):
        raise InvalidBulkFilter("filter.workflow (a workflow name) is required")
    clean: dict = {"workflow": raw["workflow"]}
    statuses = _as_list(raw.get("status"))
    if any(s not in Status.values for s in statuses):
        raise InvalidBulkFilter(f"status must be among {Status.values}, got {statuses}")
    if statuses:
        clean["status"] = statuses
    if raw.get("version") not in (None, ""):
        try:
            clean["version"] = int(raw["version"])
        except (TypeError, ValueError):
            raise InvalidBulkFilter(f"version must be a number, got {raw['version']!r}") from None
    if raw.get("newer_than"):
        try:
            since = runtime.now() - parse_timedelta(str(raw["newer_than"]))
        except ValueError as exc:
            raise InvalidBulkFilter(f"newer_than: {exc}") from None
        clean["since"] = since.isoformat()
    for key in ("since", "until"):
        if raw.get(key):
            clean[key] = _moment(raw[key], key)
    label_filters = _as_list(raw.get("label"))
    if label_filters:
        labels.parse_filters(label_filters)  # raises InvalidLabels (400) on a bad one
        clean["label"] = label_filters
    return clean


def instances_matching(filters: dict, action: str | None = None) -> QuerySet[WorkflowInstance]:
    """Instances a cleaned filter matches; with `action`, only those it applies to."""
    qs = WorkflowInstance.objects.filter(workflow_name=filters["workflow"])
    statuses = filters.get("status") or Status.values
    if action is not None:
        statuses = [s for s in statuses if s in decisions.eligible_statuses(action)]
    qs = qs.filter(status__in=statuses)
    if "version" in filters:
        qs = qs.filter(version=filters["version"])
    if "since" in filters:
        qs = qs.filter(created_at__gte=parse_datetime(filters["since"]))
    if "until" in filters:
        qs = qs.filter(created_at__lt=parse_datetime(filters["until"]))
    if filters.get("label"):
        qs = selectors.with_labels(qs, labels.parse_filters(filters["label"]))
    return qs


def _apply(action: str):
    def apply(ids: list[int]) -> tuple[int, int]:
        done = failed = 0
        for instance in WorkflowInstance.objects.filter(pk__in=ids).order_by("pk"):
            try:
                SERVICES[action](instance=instance)
                done += 1
            except ApiError:  # changed since it was matched (finished meanwhile): counted
                failed += 1
        return done, failed

    return apply


def register_kinds() -> None:
    """workflows' bulk kinds (called from WorkflowsConfig.ready, so a cluster can run them)."""

    for action, kind in BULK_ACTIONS.items():
        bulk.register(
            bulk.BulkKind(
                name=kind,
                rows=lambda filters, action=action: instances_matching(filters, action),
                apply=_apply(action),
                finish=bulk.bulk_job_audit_complete,
            )
        )

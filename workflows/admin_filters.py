"""List filters of the workflows console, matching how incidents are triaged: workflow, version,
age and labels (status is a plain field filter)."""

from datetime import timedelta

from django.contrib import admin

from workflows import labels, runtime, selectors
from workflows.authoring import registry
from workflows.errors import WorkflowError
from workflows.models import WorkflowDeployment, WorkflowInstanceLabel


class AgeFilter(admin.SimpleListFilter):
    title = "age"
    parameter_name = "age"
    WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

    def lookups(self, request, model_admin):
        return [
            ("1h", "last hour"),
            ("24h", "last 24 hours"),
            ("7d", "last 7 days"),
            ("old", "older"),
        ]

    def queryset(self, request, queryset):
        # The engine's clock wrote created_at, so age is measured on it too.
        value, now = self.value(), runtime.now()
        if value in self.WINDOWS:
            return queryset.filter(created_at__gte=now - self.WINDOWS[value])
        if value == "old":
            return queryset.filter(created_at__lt=now - self.WINDOWS["7d"])
        return queryset


class WorkflowFilter(admin.SimpleListFilter):
    """Names from the registry and the pointers, not SELECT DISTINCT over every instance."""

    title = "workflow"
    parameter_name = "workflow_name"

    def lookups(self, request, model_admin):
        stored = WorkflowDeployment.objects.values_list("workflow_name", flat=True)
        return [(name, name) for name in sorted(set(registry.names()) | set(stored))]

    def queryset(self, request, queryset):
        return queryset.filter(workflow_name=self.value()) if self.value() else queryset


class VersionFilter(admin.SimpleListFilter):
    title = "version"
    parameter_name = "version"

    def lookups(self, request, model_admin):
        name = request.GET.get("workflow_name")
        versions = (
            registry.versions(name)
            if name
            else {v for n in registry.names() for v in registry.versions(n)}
        )
        return [(str(v), f"v{v}") for v in sorted(versions)]

    def queryset(self, request, queryset):
        if self.value() and self.value().isdigit():
            return queryset.filter(version=int(self.value()))
        return queryset


class LabelFilter(admin.SimpleListFilter):
    """?label=user:alice, repeatable (all must match), like the API's list filter."""

    title = "label"
    parameter_name = "label"

    def lookups(self, request, model_admin):
        pairs = WorkflowInstanceLabel.objects.values_list("key", "value").distinct().order_by()[:20]
        return [(f"{k}:{v}", f"{k}: {v}") for k, v in sorted(pairs)]

    def queryset(self, request, queryset):
        wanted = request.GET.getlist(self.parameter_name)
        if not wanted:
            return queryset
        try:
            return selectors.with_labels(queryset, labels.parse_filters(wanted))
        except WorkflowError:
            return queryset.none()

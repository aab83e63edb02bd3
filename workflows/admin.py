"""The workflows console (Procrastinate-style): read-only lists, status first; an instance page
with a timeline; pause/resume/terminate/restart on eligible rows only (confirmation before
terminate/restart), retry now, skip wait and rerun from a step; bulk actions by filter; a
send-event form; and a per-workflow overview with "activate version".

Which actions an instance offers comes from workflows.decisions; every action goes through
workflows.actions, which calls the engine and writes the audit row, as the HTTP API does.
Filters live in workflows.admin_filters, the recovery pages in workflows.admin_pages."""

import json

from django.contrib import admin, messages
from django.db.models import Count, OuterRef, Subquery
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from ops import strict_json
from ops.console import ReadOnlyAdmin, confirmation_page, is_confirmed, time_range_filter
from ops.errors import ApiError
from workflows import actions, admin_pages, decisions, runtime, selectors
from workflows.admin_filters import AgeFilter, LabelFilter, VersionFilter, WorkflowFilter
from workflows.admin_live import LiveInstanceAdmin
from workflows.authoring import registry
from workflows.http.permissions import policy_check
from workflows.http.timeline import duration_text, timeline
from workflows.models import (
    TERMINAL_STATUSES,
    WorkflowDeployment,
    WorkflowInstance,
    WorkflowStep,
)
from workflows.selectors import instance_code_changed

CONFIRM = ("terminate", "restart")
BULK_LINKS = ("restart", "terminate", "pause", "resume")
STATUS_COLORS = {
    "active": "#2563eb",
    "waiting": "#7c3aed",
    "paused": "#b45309",
    "errored": "#dc2626",
    "terminated": "#6b7280",
    "complete": "#16a34a",
}


def _policy(request, operation: str, instance) -> None:
    """The deployment's WORKFLOWS_POLICIES apply to the console as they do to the API."""
    policy_check(
        request,
        operation=operation,
        workflow_name=instance.workflow_name,
        instance_id=instance.instance_id,
    )


def pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _latest_step(field: str):
    """The newest step of the instance's current run (one indexed lookup per listed row)."""
    steps = WorkflowStep.objects.filter(
        instance=OuterRef("pk"), run_number=OuterRef("run_number")
    ).order_by("-started_at", "-id")
    return Subquery(steps.values(field)[:1])


@admin.register(WorkflowInstance)
class WorkflowInstanceAdmin(LiveInstanceAdmin, ReadOnlyAdmin):
    list_display = (
        "status_badge",
        "workflow_name",
        "instance_id",
        "version_label",
        "current_step",
        "last_error",
        "started",
        "duration",
    )
    list_display_links = ("instance_id",)
    list_filter = (
        "status",
        WorkflowFilter,
        VersionFilter,
        AgeFilter,
        LabelFilter,
        time_range_filter("created_at", "created (UTC)"),
    )
    search_fields = ("=instance_id", "instance_id__startswith")
    ordering = ("-id",)
    list_per_page = 50
    actions = ["pause_selected", "resume_selected", "terminate_selected", "restart_selected"]
    change_form_template = "admin/workflows/instance_detail.html"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                latest_step_name=_latest_step("name"),
                latest_step_status=_latest_step("status"),
                latest_step_error=_latest_step("error"),
            )
        )

    @admin.display(description="current step")
    def current_step(self, obj):
        if not obj.latest_step_name:
            return "-"
        return f"{obj.latest_step_name} ({obj.latest_step_status})"

    @admin.display(description="last error")
    def last_error(self, obj):
        # The instance's own error once it failed, else the newest step's (a retry pending).
        error = obj.error or obj.latest_step_error
        if not error:
            return ""
        if isinstance(error, str):  # JSON from a subquery may arrive as text (SQLite)
            try:
                error = json.loads(error)
            except ValueError:
                return error[:80]
        text = (
            f"{error.get('name', '')}: {error.get('message', '')}"
            if isinstance(error, dict)
            else str(error)
        )
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="duration")
    def duration(self, obj):
        end = obj.completed_at or (None if obj.status in TERMINAL_STATUSES else runtime.now())
        return duration_text(obj.started_at, end or obj.updated_at)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return format_html(
            '<b style="color:{}">{}</b>', STATUS_COLORS.get(obj.status, "inherit"), obj.status
        )

    @admin.display(description="version · run", ordering="version")
    def version_label(self, obj):
        if registry.get(obj.workflow_name, obj.version) is None:
            return format_html(
                'v{} <b style="color:#dc2626">version_missing</b> · run {}',
                obj.version,
                obj.run_number,
            )
        return f"v{obj.version} · run {obj.run_number}"

    # --- bulk actions -----------------------------------------------------------------------

    def _bulk(self, request, queryset, action: str):
        eligible = list(queryset.filter(status__in=decisions.eligible_statuses(action)))
        skipped = queryset.count() - len(eligible)
        if action in CONFIRM and not is_confirmed(request):
            return admin_pages.confirm_instances(
                request, action, eligible, skipped=skipped, bulk_action=f"{action}_selected"
            )
        done, failed = [], []
        for instance in eligible:
            try:
                _policy(request, "manage", instance)
                actions.do_instance_action(instance=instance, action=action, request=request)
                done.append(instance)
            except ApiError as exc:
                failed.append(f"{instance.instance_id}: {exc.code}")
        text = (
            f"{action.capitalize()}: {len(done)} instance(s) done, {skipped} not eligible skipped"
        )
        if failed:
            text += f", {len(failed)} refused ({'; '.join(failed[:5])})"
        self.report(
            request,
            text + ".",
            objects=done,
            level=messages.WARNING if failed else messages.SUCCESS,
        )
        return None

    @admin.action(description="Pause selected (active/waiting)")
    def pause_selected(self, request, queryset):
        return self._bulk(request, queryset, "pause")

    @admin.action(description="Resume selected (paused)")
    def resume_selected(self, request, queryset):
        return self._bulk(request, queryset, "resume")

    @admin.action(description="Terminate selected (not finished) …")
    def terminate_selected(self, request, queryset):
        return self._bulk(request, queryset, "terminate")

    @admin.action(description="Restart selected …")
    def restart_selected(self, request, queryset):
        return self._bulk(request, queryset, "restart")

    # --- instance page: timeline, single actions, send event --------------------------------

    def get_urls(self):
        custom = [
            path(
                "<int:pk>/do/<str:action>/",
                self.admin_site.admin_view(self.single_action_view),
                name="workflows_instance_action",
            ),
            path(
                "<int:pk>/send-event/",
                self.admin_site.admin_view(self.send_event_view),
                name="workflows_instance_send_event",
            ),
            path(
                "<int:pk>/rerun/",
                self.admin_site.admin_view(admin_pages.rerun_view),
                name="workflows_instance_rerun",
            ),
            path(
                "bulk/<str:action>/",
                self.admin_site.admin_view(admin_pages.bulk_view),
                name="workflows_instance_bulk",
            ),
        ]
        return custom + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        # "… every instance matching" links carry the list's current filters.
        query = request.GET.urlencode()
        links = [
            (action, reverse("admin:workflows_instance_bulk", args=[action]) + f"?{query}")
            for action in BULK_LINKS
        ]
        return super().changelist_view(request, {"bulk_links": links, **(extra_context or {})})

    def change_view(self, request, object_id, form_url="", extra_context=None):
        instance = get_object_or_404(WorkflowInstance, pk=object_id)
        run = int(request.GET.get("run") or instance.run_number)
        context = {
            "instance": instance,
            "run": run,
            "runs": range(instance.run_number, 0, -1),
            "timeline": timeline(instance=instance, run_number=run),
            "params_json": pretty(instance.params),
            "output_json": pretty(instance.output) if instance.output is not None else None,
            "error_json": pretty(instance.error) if instance.error else None,
            "version_missing": registry.get(instance.workflow_name, instance.version) is None,
            "code_changed": instance_code_changed(instance),
            "eligible": decisions.eligible_actions(instance.status),
            **_recovery_context(instance),
            "can_send_event": instance.status not in TERMINAL_STATUSES,
            "status_color": STATUS_COLORS.get(instance.status),
            "family": selectors.instance_family(instance),
            "parent_pk": instance.parent_id,
            "children_rows": instance.children.order_by("id")[:100],
        }
        return super().change_view(
            request, object_id, form_url, {**context, **(extra_context or {})}
        )

    def _back(self, instance):
        return HttpResponseRedirect(
            reverse("admin:workflows_workflowinstance_change", args=[instance.pk])
        )

    def single_action_view(self, request, pk: int, action: str):
        instance = get_object_or_404(WorkflowInstance, pk=pk)
        if action not in actions.INSTANCE_ACTIONS:
            self.message_user(request, f"Unknown action {action!r}.", messages.ERROR)
            return self._back(instance)
        if request.method != "POST" or (action in CONFIRM and not is_confirmed(request)):
            if action not in admin_pages.CONFIRM_TEXT:  # retry now, skip wait: POST only
                return self._back(instance)
            return admin_pages.confirm_instances(
                request,
                action,
                [instance],
                skipped=0,
                title=f"{action.capitalize()} {instance.instance_id}?",
            )
        try:
            _policy(request, "manage", instance)
            actions.do_instance_action(instance=instance, action=action, request=request)
            instance.refresh_from_db()
            self.report(
                request,
                f"{action.replace('_', ' ').capitalize()}: 1 instance, now {instance.status}.",
                objects=[instance],
            )
        except ApiError as exc:
            self.message_user(
                request,
                f"{action.replace('_', ' ')} refused: {exc.code}: {exc.message}",
                messages.ERROR,
            )
        return self._back(instance)

    def send_event_view(self, request, pk: int):
        instance = get_object_or_404(WorkflowInstance, pk=pk)
        error, event_type, payload_text = None, "", ""
        if request.method == "POST":
            event_type = request.POST.get("type", "").strip()
            payload_text = request.POST.get("payload", "").strip()
            try:
                payload = strict_json.loads(payload_text) if payload_text else None
                _policy(request, "events", instance)
                actions.do_send_event(
                    instance=instance, event_type=event_type, payload=payload, request=request
                )
            except strict_json.InvalidJson as exc:
                error = f"payload is not valid JSON ({exc.reason}): {exc.message}"
            except ApiError as exc:
                error = f"{exc.code}: {exc.message}"
            else:
                self.report(
                    request,
                    f"Sent 1 event {event_type!r} to {instance.instance_id}.",
                    objects=[instance],
                )
                return self._back(instance)
        return TemplateResponse(
            request,
            "admin/workflows/send_event.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"Send event to {instance.instance_id}",
                "instance": instance,
                "error": error,
                "event_type": event_type,
                "payload_text": payload_text,
            },
        )


@admin.register(WorkflowDeployment)
class WorkflowOverviewAdmin(ReadOnlyAdmin):
    """The "workflows" page: per workflow and version, instance counts by status and the
    active pointer, with activate (or roll back) buttons."""

    change_list_template = "admin/workflows/overview.html"

    def get_urls(self):
        return [
            path(
                "activate/<str:name>/<int:version>/",
                self.admin_site.admin_view(self.activate_view),
                name="workflows_activate_version",
            ),
            path(
                "switch/<str:switch>/<str:name>/",
                self.admin_site.admin_view(self.switch_view),
                name="workflows_switch",
            ),
        ] + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        statuses = list(STATUS_COLORS)
        counts = {}
        for row in (
            WorkflowInstance.objects.values("workflow_name", "version", "status")
            .annotate(n=Count("id"))
            .order_by()
        ):
            counts.setdefault((row["workflow_name"], row["version"]), {})[row["status"]] = row["n"]
        active = dict(WorkflowDeployment.objects.values_list("workflow_name", "active_version"))
        disabled = set(
            WorkflowDeployment.objects.filter(disabled=True).values_list("workflow_name", flat=True)
        )
        names = sorted(set(registry.names()) | {name for name, _ in counts} | set(active))
        load = selectors.workflow_load()
        workflows = []
        for name in names:
            versions = sorted(set(registry.versions(name)) | {v for n, v in counts if n == name})
            definition = registry.latest(name)
            idle = {"running": 0, "queued": 0, "by_key": {}}
            workflows.append(
                {
                    "name": name,
                    "active_version": active.get(name),
                    "disabled": name in disabled,
                    "load": load.get(name, idle),
                    "concurrency": definition.concurrency if definition else None,
                    "concurrency_key": definition.concurrency_key if definition else None,
                    "schedules": selectors.schedules_describe(name)
                    if definition and definition.schedules
                    else [],
                    "versions": [
                        {
                            "version": v,
                            "registered": registry.get(name, v) is not None,
                            "is_active": active.get(name) == v,
                            "counts": [counts.get((name, v), {}).get(s, 0) for s in statuses],
                            "changelist": reverse("admin:workflows_workflowinstance_changelist")
                            + f"?workflow_name={name}&version={v}",
                        }
                        for v in versions
                    ],
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Workflows",
            "statuses": statuses,
            "workflows": workflows,
            **(extra_context or {}),
        }
        return TemplateResponse(request, self.change_list_template, context)

    def switch_view(self, request, name: str, switch: str):
        """Disable (refuse new instances) or enable a workflow: workflows.rollout."""
        back = HttpResponseRedirect(reverse("admin:workflows_workflowdeployment_changelist"))
        if switch not in ("disable", "enable"):
            return back
        if not is_confirmed(request):
            return confirmation_page(
                request,
                model=WorkflowDeployment,
                title=f"{switch.capitalize()} {name}?",
                explanation=f"New instances of {name} will be "
                + ("refused (409 disabled)" if switch == "disable" else "accepted again")
                + "; instances already running go on.",
                submit=f"Yes, {switch} {name}",
            )
        try:
            policy_check(request, operation="manage", workflow_name=name)
            action = (
                actions.do_disable_workflow if switch == "disable" else actions.do_enable_workflow
            )
            action(name=name, request=request)
            outcome = "refused" if switch == "disable" else "accepted"
            self.message_user(
                request, f"{switch.capitalize()}d {name}: new instances are {outcome}."
            )
        except ApiError as exc:
            self.message_user(
                request, f"{switch} refused: {exc.code}: {exc.message}", messages.ERROR
            )
        return back

    def activate_view(self, request, name: str, version: int):
        back = HttpResponseRedirect(reverse("admin:workflows_workflowdeployment_changelist"))
        if not is_confirmed(request):
            return confirmation_page(
                request,
                model=WorkflowDeployment,
                title=f"Activate {name} v{version}?",
                explanation=(
                    f"New instances of {name} will run version {version}. Instances already "
                    "started keep the version they started on."
                ),
                submit=f"Yes, activate v{version}",
            )
        try:
            policy_check(request, operation="manage", workflow_name=name)
            actions.do_activate_version(workflow_name=name, version=version, request=request)
            self.report(
                request,
                f"Activated {name} v{version}: new instances run it.",
                objects=WorkflowDeployment.objects.filter(workflow_name=name),
            )
        except ApiError as exc:
            self.message_user(
                request, f"Activate refused: {exc.code}: {exc.message}", messages.ERROR
            )
        return back


def _recovery_context(instance) -> dict:
    """The instance page's recovery panel: retry now / skip wait when they apply, and the
    current run's steps for "rerun from a step" (in the order the run reached them)."""
    steps = list(
        WorkflowStep.objects.filter(instance=instance, run_number=instance.run_number)
        .order_by("id")
        .values_list("name", "type", "status")
    )
    states = [decisions.StepState(name=n, type=t, status=s) for n, t, s in steps]
    return {
        "can_retry_now": decisions.retry_now_applies(instance.status, states),
        "can_skip_wait": decisions.skip_wait_applies(instance.status, states),
        "rerun_steps": [name for name, _, _ in steps],
    }

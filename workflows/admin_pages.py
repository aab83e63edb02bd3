"""Recovery pages of the workflows console: the confirmation of instance actions, "rerun from a
step" (a step picker, then a confirmation listing what runs again) and "… every instance
matching" (a filter, its count, a confirmation, then a tracked job). Each calls
workflows.actions, which audits."""

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse

from ops.bulk_pages import bulk_page
from ops.console import confirmation_page, console_report, is_confirmed
from ops.errors import ApiError
from workflows import actions, recovery
from workflows.bulk import bulk_filters_clean, instances_matching
from workflows.http.permissions import policy_check
from workflows.models import Status, WorkflowInstance, WorkflowStep

INSTANCE_COLUMNS = ("workflow", "instance", "status now", "run")
CONFIRM_TEXT = {
    "pause": "Paused instances keep their state and run again when resumed.",
    "resume": "Resumed instances continue where they stopped.",
    "terminate": "Terminated instances never run again (restart starts a new run).",
    "restart": (
        "Restart starts a new run from the first step; earlier runs stay in the history. "
        "Steps run again, so they must be idempotent."
    ),
}


def confirm_instances(
    request, action: str, instances, *, skipped: int, bulk_action=None, title=None
):
    return confirmation_page(
        request,
        model=WorkflowInstance,
        title=title or f"{action.capitalize()} {len(instances)} instance(s)?",
        explanation=CONFIRM_TEXT[action],
        columns=INSTANCE_COLUMNS,
        rows=[(i.workflow_name, i.instance_id, i.status, i.run_number) for i in instances],
        ignored=skipped,
        submit=f"Yes, {action}",
        action=bulk_action,
        enabled=bool(instances),
    )


def _instance_page(instance) -> HttpResponseRedirect:
    return HttpResponseRedirect(
        reverse("admin:workflows_workflowinstance_change", args=[instance.pk])
    )


def rerun_view(request, pk: int):
    """GET ?from_step=<name> (the instance page's step picker): what will run again; POST with
    the confirmation: restart from that step."""
    instance = get_object_or_404(WorkflowInstance, pk=pk)
    from_step = (request.POST if request.method == "POST" else request.GET).get("from_step", "")
    again = recovery.restart_preview(instance=instance, from_step=from_step)
    if again is None:
        messages.error(request, f"Run {instance.run_number} has no step named {from_step!r}.")
        return _instance_page(instance)
    if is_confirmed(request):
        try:
            policy_check(
                request,
                operation="manage",
                workflow_name=instance.workflow_name,
                instance_id=instance.instance_id,
            )
            fresh = actions.do_restart(instance=instance, from_step=from_step, request=request)
            console_report(
                request,
                f"Restarted {instance.instance_id} from step {from_step!r} as run "
                f"{fresh.run_number}: {len(again)} step(s) run again.",
                objects=[fresh],
            )
        except ApiError as exc:
            messages.error(request, f"Rerun refused: {exc.code}: {exc.message}")
        return _instance_page(instance)
    kept = WorkflowStep.objects.filter(
        instance=instance, run_number=instance.run_number, status="complete"
    ).exclude(name__in=again)
    return confirmation_page(
        request,
        model=WorkflowInstance,
        title=f"Rerun {instance.instance_id} from step {from_step!r}?",
        explanation=(
            f"Run {instance.run_number + 1} starts with the stored results of the "
            f"{kept.count()} step(s) completed before {from_step!r}; the steps below run again "
            "(and any step the code reaches after them). They must be idempotent."
        ),
        columns=("#", "step that runs again"),
        rows=[(n, name) for n, name in enumerate(again, 1)],
        submit=f"Yes, rerun from {from_step}",
        form=_FromStepForm(initial={"from_step": from_step}),
        noun="steps",
        cancel_url=reverse("admin:workflows_workflowinstance_change", args=[instance.pk]),
    )


class _FromStepForm(forms.Form):
    from_step = forms.CharField(widget=forms.HiddenInput)


STATUS_CHOICES = [(s, s) for s in Status.values]
BULK_TEXT = {
    "restart": "Each matching instance starts a new run from its first step.",
    "terminate": "Each matching live instance is terminated; finished ones are not matched.",
    "pause": "Each matching active or waiting instance is paused.",
    "resume": "Each matching paused instance is resumed.",
}


class InstanceBulkForm(forms.Form):
    """The filter of a bulk action; `since`/`until` bound when the instance was created."""

    workflow = forms.CharField()
    status = forms.MultipleChoiceField(
        choices=STATUS_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )
    version = forms.IntegerField(required=False)
    newer_than = forms.CharField(required=False, help_text='e.g. "1h" (created in the last hour)')
    since = forms.CharField(required=False, help_text="created at or after, ISO (UTC)")
    until = forms.CharField(required=False, help_text="created before, ISO (UTC)")
    label = forms.CharField(required=False, help_text="key:value")

    def filters(self) -> dict:
        data = {k: v for k, v in self.cleaned_data.items() if v not in (None, "", [])}
        if "label" in data:
            data["label"] = [data["label"]]
        return bulk_filters_clean(data)


AGE_TO_DURATION = {"1h": "1h", "24h": "24h", "7d": "7d"}


def initial_from_changelist(params) -> dict:
    """The instance list's own filters, as the bulk form's starting point."""
    initial = {"workflow": params.get("workflow_name", "")}
    status = params.get("status__exact") or params.get("status")
    if status:
        initial["status"] = [status]
    for key in ("version", "since", "until", "label"):
        if params.get(key):
            initial[key] = params[key]
    if params.get("age") in AGE_TO_DURATION:
        initial["newer_than"] = AGE_TO_DURATION[params["age"]]
    return initial


def bulk_view(request, action: str):
    if action not in BULK_TEXT:
        messages.error(request, f"Unknown bulk action {action!r}.")
        return HttpResponseRedirect(reverse("admin:workflows_workflowinstance_changelist"))

    if request.method == "GET" and "workflow" not in request.GET:
        # Came from the instance list: its filters, renamed to the form's fields.
        query = urlencode(initial_from_changelist(request.GET), doseq=True)
        return HttpResponseRedirect(f"{request.path}?{query}")

    def start(filters):
        policy_check(request, operation="manage", workflow_name=filters["workflow"])
        return actions.do_bulk(action=action, filters=filters, request=request)

    return bulk_page(
        request,
        model=WorkflowInstance,
        title=f"{action.capitalize()} every instance matching a filter",
        explanation=BULK_TEXT[action],
        form_class=InstanceBulkForm,
        initial={},
        rows=lambda filters: instances_matching(filters, action).order_by("id"),
        cells=lambda i: (i.workflow_name, i.instance_id, i.status, i.run_number),
        columns=INSTANCE_COLUMNS,
        start=start,
        submit=f"Yes, {action} {{count}} instance(s)",
    )

"""Shared pieces of the operations console (the Django admin), used by every app's admin:

- `ReadOnlyAdmin`: rows are evidence, never added, edited or deleted by hand; the model's
  *change* permission says who may run its actions (replay, pause, retry …);
- `HealthDataAdmin`: a ReadOnlyAdmin whose pages show a user's health data: viewing them is
  recorded in the access audit (ops.access);
- `confirmation_page` / `is_confirmed`: the one page shown between choosing a destructive or
  mass-changing action and running it — what will be touched, what will happen — posting
  back `confirm=yes` with the same action and selection.
- `console_report`: the message an action ends with (counts), also written to Django's
  LogEntry so console actions appear under "Recent actions" on the front page.
"""

from collections.abc import Iterable, Sequence

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_permission_codename
from django.contrib.contenttypes.models import ContentType
from django.template.response import TemplateResponse

CONFIRM_FIELD = "confirm"
PREVIEW_ROWS = 50
# A LogEntry per touched object, as Django's own delete action writes; capped so a replay of
# thousands of rows does not write thousands of history rows (the audit log has the full ids).
MAX_LOG_ENTRIES = 100


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False  # no COUNT(*) over a big table on every page

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        # Pages stay viewable with the view permission; nothing is edited in a form.
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        # Forms never change a row (has_change_permission is False for everyone), but the
        # change *permission* still decides who may act on rows through actions.
        actions = super().get_actions(request)
        codename = get_permission_codename("change", self.opts)
        return actions if request.user.has_perm(f"{self.opts.app_label}.{codename}") else {}

    def report(self, request, text: str, *, objects: Iterable = (), level=messages.SUCCESS):
        console_report(request, text, objects=objects, model=self.model, level=level)


class HealthDataAdmin(ReadOnlyAdmin):
    """A console page of a user's health data: each view of a row, and with `audit_list` each
    page of the list, is recorded as a read of the users it concerns (ops.access), before the
    page is rendered. `read_thing` names what is read; `read_subjects(obj)` whom it concerns."""

    read_thing = ""
    audit_list = False

    def read_subjects(self, obj):
        return obj.user_id

    def change_view(self, request, object_id, form_url="", extra_context=None):
        response = super().change_view(request, object_id, form_url, extra_context)
        obj = (getattr(response, "context_data", None) or {}).get("original")
        if obj is not None:
            self.audit_read(request, [obj], resource=f"{self.read_thing}:{obj.pk}")
        return response

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if self.audit_list and changelist is not None:
            self.audit_read(request, changelist.result_list)
        return response

    def audit_read(self, request, objects, *, resource: str = "") -> None:
        from ops.access import audit_read

        subjects = {self.read_subjects(obj) for obj in objects} - {None}
        if subjects or resource:
            audit_read(
                request=request, thing=self.read_thing, subjects=subjects or None, resource=resource
            )


def is_confirmed(request) -> bool:
    return request.method == "POST" and request.POST.get(CONFIRM_FIELD) == "yes"


def confirmation_page(
    request,
    *,
    model,
    title: str,
    explanation: str,
    columns: Sequence[str] = (),
    rows: Sequence[Sequence] = (),
    total: int | None = None,
    ignored: int = 0,
    submit: str,
    action: str | None = None,
    form=None,
    enabled: bool = True,
    danger: bool = False,
    cancel_url: str | None = None,
    noun: str | None = None,
) -> TemplateResponse:
    """The confirmation step. `rows` (cells per `columns`) preview what will be touched, at most
    PREVIEW_ROWS of `total`; `action` set means an admin bulk action, whose selection is posted
    again; `form` adds fields (a reason, a limit) that the action validates."""
    total = len(rows) if total is None else total
    context = {
        **admin.site.each_context(request),
        "opts": model._meta,
        "title": title,
        "explanation": explanation,
        "columns": columns,
        "rows": list(rows)[:PREVIEW_ROWS],
        "total": total,
        "more": max(total - PREVIEW_ROWS, 0),
        "ignored": ignored,
        "submit": submit,
        "action": action,
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME) if action else [],
        "select_across": request.POST.get("select_across", "0"),
        "checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "confirm_field": CONFIRM_FIELD,
        "form": form,
        "enabled": enabled,
        "danger": danger,
        "cancel_url": cancel_url,
        "noun": noun or model._meta.verbose_name_plural,
    }
    return TemplateResponse(request, "admin/ops/confirm.html", context)


def console_report(
    request, text: str, *, objects: Iterable = (), model=None, level=messages.SUCCESS
) -> None:
    """Tell the operator what happened and record it under "Recent actions"."""
    messages.add_message(request, level, text)
    user_id = getattr(request.user, "pk", None)
    if user_id is None:
        return
    objects = list(objects)[:MAX_LOG_ENTRIES]
    if objects:
        LogEntry.objects.log_actions(
            user_id=user_id,
            queryset=objects,
            action_flag=CHANGE,
            change_message=text,
            single_object=len(objects) == 1,
        )
    elif model is not None:
        # An action on no single row (a drain, a wipe whose user is gone): the model's entry.
        LogEntry.objects.create(
            user_id=user_id,
            content_type=ContentType.objects.get_for_model(model),
            object_id=None,
            object_repr=str(model._meta.verbose_name_plural),
            action_flag=CHANGE,
            change_message=text,
        )

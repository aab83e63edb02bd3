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


def staff_json(view):
    """A console JSON endpoint (the pages' live refresh): staff sessions only, and every refusal
    or missing row is `{"code", "message"}` JSON, never a login redirect or an HTML 404 page."""
    from functools import wraps

    from django.core.exceptions import PermissionDenied
    from django.http import Http404, JsonResponse

    from ops.errors import ErrorCode, error_body

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            body = error_body(ErrorCode.AUTHENTICATION_REQUIRED, "log in to the console first")
            return JsonResponse(body, status=401)
        if not (user.is_active and user.is_staff):
            body = error_body(ErrorCode.PERMISSION_DENIED, "console pages are for staff")
            return JsonResponse(body, status=403)
        if request.method != "GET":
            body = error_body(ErrorCode.METHOD_NOT_ALLOWED, "live endpoints answer GET only")
            return JsonResponse(body, status=405)
        try:
            return JsonResponse(view(request, *args, **kwargs))
        except PermissionDenied:
            body = error_body(ErrorCode.PERMISSION_DENIED, "no view permission on these rows")
            return JsonResponse(body, status=403)
        except Http404:
            return JsonResponse(error_body(ErrorCode.NOT_FOUND, "no such row"), status=404)

    return wrapped


class TimeRangeFilter(admin.ListFilter):
    """?since=…&until=… on a list (ISO 8601; a time without an offset is UTC, as the console
    shows times): rows whose `field` lies in the range, both ends optional. Subclass with
    `field`. A value that is not a time is refused the admin's way (the list with ?e=1)."""

    title = "time range"
    field = "created_at"
    template = "admin/ops/time_range_filter.html"
    SINCE, UNTIL = "since", "until"

    def __init__(self, request, params, model, model_admin):
        super().__init__(request, params, model, model_admin)
        self.values = {}
        for name in (self.SINCE, self.UNTIL):
            if name in params:
                value = params.pop(name)
                value = value[-1] if isinstance(value, list) else value
                if value:
                    self.values[name] = value
        self.request = request

    def has_output(self):
        return True

    def expected_parameters(self):
        return [self.SINCE, self.UNTIL]

    def queryset(self, request, queryset):
        from django.contrib.admin.options import IncorrectLookupParameters

        try:
            bounds = {name: parse_instant(value) for name, value in self.values.items()}
        except ValueError as exc:
            raise IncorrectLookupParameters(str(exc)) from exc
        if self.SINCE in bounds:
            queryset = queryset.filter(**{f"{self.field}__gte": bounds[self.SINCE]})
        if self.UNTIL in bounds:
            queryset = queryset.filter(**{f"{self.field}__lt": bounds[self.UNTIL]})
        return queryset

    def choices(self, changelist):
        # One "choice": the form's current values and the other parameters it must keep.
        keep = [
            (key, value)
            for key, values in self.request.GET.lists()
            for value in values
            if key not in (self.SINCE, self.UNTIL, "p")
        ]
        yield {
            "since": self.values.get(self.SINCE, ""),
            "until": self.values.get(self.UNTIL, ""),
            "keep": keep,
            "field": self.field,
            "clear_url": changelist.get_query_string(remove=[self.SINCE, self.UNTIL]),
            "active": bool(self.values),
        }


def parse_instant(text: str):
    """An aware datetime from ISO 8601 ("2026-11-27T02:00", "…Z", "…+01:00"); naive is UTC."""
    from datetime import UTC, datetime

    value = datetime.fromisoformat(text.strip().replace(" ", "T"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def time_range_filter(field: str, title: str = "time range") -> type[TimeRangeFilter]:
    """A TimeRangeFilter over `field`, for a ModelAdmin's list_filter."""
    return type(f"TimeRange_{field}", (TimeRangeFilter,), {"field": field, "title": title})


def live_context(*, url: str, state: dict) -> dict:
    """The `live` context of admin/ops/live.html: where the page polls, its stamp at render
    time, whether anything is in flight, and the poll interval (CONSOLE_LIVE_INTERVAL_MS)."""
    from django.conf import settings

    return {
        "url": url,
        "stamp": state["stamp"],
        "in_flight": state["in_flight"],
        "interval": settings.CONSOLE_LIVE_INTERVAL_MS,
    }

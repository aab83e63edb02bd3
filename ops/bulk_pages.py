"""The console's "act on everything this filter matches" page, shared by the apps: a filter form
(pre-filled from the list the operator came from), the COUNT it matches now and a preview, a
confirmation that starts the job (ops.bulk), then the job's progress page (ops.admin)."""

from collections.abc import Callable, Sequence

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ops.console import CONFIRM_FIELD, PREVIEW_ROWS, is_confirmed
from ops.errors import ApiError
from ops.models import BulkJob


def bulk_page(
    request,
    *,
    model,
    title: str,
    explanation: str,
    form_class: type[forms.Form],
    initial: dict,
    rows: Callable[[dict], object],
    cells: Callable[[object], Sequence],
    columns: Sequence[str],
    start: Callable[[dict], BulkJob],
    submit: str,
) -> TemplateResponse | HttpResponseRedirect:
    """`form_class` turns the page's fields into a filter (`form.filters()`); `rows(filters)`
    is the queryset the job will walk (counted and previewed here); `start(filters)` asks for
    the job (the app's do_* action: job + audit row) and the page redirects to its progress."""
    data = request.POST if request.method == "POST" else (request.GET or None)
    form = form_class(data, initial=initial)
    count, preview, error = None, [], None
    if form.is_bound and form.is_valid():
        try:
            filters = form.filters()
            if is_confirmed(request):
                job = start(filters)
                messages.success(
                    request, f"Bulk job {job.pk} started: {job.total} row(s) to go through."
                )
                return HttpResponseRedirect(reverse("admin:ops_bulkjob_change", args=[job.pk]))
            matched = rows(filters)
            count = matched.order_by().count()
            preview = [cells(row) for row in matched[:PREVIEW_ROWS]]
        except ApiError as exc:
            error = f"{exc.code}: {exc.message}"
    context = {
        **admin.site.each_context(request),
        "opts": model._meta,
        "title": title,
        "explanation": explanation,
        "form": form,
        "count": count,
        "columns": columns,
        "rows": preview,
        "more": max((count or 0) - len(preview), 0),
        "error": error,
        "submit": submit.format(count=count),
        "confirm_field": CONFIRM_FIELD,
    }
    return TemplateResponse(request, "admin/ops/bulk_start.html", context)

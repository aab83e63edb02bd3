"""Custom console pages for ingest: action confirmations, drain, "backfill N days" on a
connection, the user overview and its "wipe all data". Each page parses the form, calls the same
service as the API, and redirects with a message that gives counts."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ingest.connections import connection_backfill_request
from ingest.drain import DRAIN_MAX_LIMIT, drain_candidates
from ingest.imports import import_job_refresh, import_job_summary
from ingest.models import TerraConnection
from ingest.selectors import user_overview
from ingest.triage import raw_events_drain_request
from ingest.wipe import user_wipe, user_wipe_preview
from ops.errors import ApiError

PREVIEW_ROWS = 50


def _context(request, title: str, **extra) -> dict:
    return {**admin.site.each_context(request), "title": title, **extra}


def confirm_action(
    request,
    model_admin,
    queryset,
    *,
    action: str,
    title: str,
    explanation: str,
    ask_reason: bool = False,
    ignored: int = 0,
):
    """The page between choosing an action and running it: which rows, what will happen."""
    rows = list(queryset.select_related("user")[: PREVIEW_ROWS + 1])
    return TemplateResponse(
        request,
        "admin/ingest/confirm_action.html",
        _context(
            request,
            title,
            opts=model_admin.model._meta,
            action=action,
            explanation=explanation,
            rows=rows[:PREVIEW_ROWS],
            more=max(queryset.count() - PREVIEW_ROWS, 0) if len(rows) > PREVIEW_ROWS else 0,
            count=queryset.count(),
            ignored=ignored,
            ids=request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            select_across=request.POST.get("select_across", "0"),
            ask_reason=ask_reason,
            reason=request.POST.get("reason", ""),
            checkbox_name=helpers.ACTION_CHECKBOX_NAME,
        ),
    )


class DrainForm(forms.Form):
    limit = forms.IntegerField(min_value=1, max_value=DRAIN_MAX_LIMIT, initial=DRAIN_MAX_LIMIT)
    include_skipped = forms.BooleanField(
        required=False, help_text="skipped rows only skip again: rarely useful"
    )
    include_no_connection = forms.BooleanField(
        required=False,
        help_text="rows parked because their Terra user has no connection stay unresolved "
        "until a connection exists",
    )


def drain_view(request):
    if not request.user.has_perm("ingest.change_rawevent"):
        raise PermissionDenied
    form = DrainForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        result = raw_events_drain_request(**form.cleaned_data, request=request)
        messages.success(
            request,
            f"Drain picked {result['selected']} raw event(s) and enqueued {result['enqueued']}.",
        )
        return redirect("admin:ingest_rawevent_changelist")
    opts = form.data if form.is_bound else {}
    waiting = drain_candidates(
        include_skipped=bool(opts.get("include_skipped")),
        include_no_connection=bool(opts.get("include_no_connection")),
    ).count()
    return TemplateResponse(
        request,
        "admin/ingest/drain.html",
        _context(request, "Drain stuck raw events", form=form, waiting=waiting),
    )


class BackfillForm(forms.Form):
    days = forms.IntegerField(min_value=1, max_value=1460, initial=7)


def backfill_view(request, connection_id: int):
    if not request.user.has_perm("ingest.change_terraconnection"):
        raise PermissionDenied
    connection = get_object_or_404(TerraConnection.objects.select_related("user"), pk=connection_id)
    form = BackfillForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        outcomes = connection_backfill_request(
            connection=connection, days=form.cleaned_data["days"], request=request
        )
        failed = sum(1 for o in outcomes if o["status"] != "requested")
        level = messages.SUCCESS if not failed else messages.WARNING
        messages.add_message(
            request,
            level,
            f"Requested {len(outcomes) - failed} of {len(outcomes)} backfill(s) of "
            f"{form.cleaned_data['days']} day(s) for {connection.terra_user_id}"
            + (f"; {failed} failed (see traces)." if failed else "."),
        )
        return redirect("admin:ingest_terraconnection_change", connection.pk)
    return TemplateResponse(
        request,
        "admin/ingest/backfill.html",
        _context(request, f"Backfill {connection}", form=form, connection=connection),
    )


def _user_or_404(username: str):
    from ingest.selectors import user_get

    try:
        return user_get(username=username)
    except ApiError:
        raise Http404(f"No user {username!r}") from None


def user_lookup_view(request):
    username = request.GET.get("username", "").strip()
    if not username:
        return redirect("admin:index")
    return redirect("admin:ingest_user_overview", username)


def user_overview_view(request, username: str):
    if not request.user.has_perm("ingest.view_terraconnection"):
        raise PermissionDenied
    info = user_overview(user=_user_or_404(username))
    imports = [import_job_summary(import_job_refresh(job=j)) for j in info["imports"]]
    return TemplateResponse(
        request,
        "admin/ingest/user_overview.html",
        _context(
            request,
            f"User {username}",
            info=info,
            imports=imports,
            raw_events_url=reverse("admin:ingest_rawevent_changelist"),
            can_wipe=request.user.has_perm("auth.delete_user"),
        ),
    )


def user_wipe_view(request, username: str):
    if not request.user.has_perm("auth.delete_user"):
        raise PermissionDenied
    user = _user_or_404(username)
    if request.method == "POST" and request.POST.get("confirm_username") == username:
        counts = user_wipe(user=user, request=request)
        total = sum(v for k, v in counts.items() if k not in ("users", "stored_files"))
        messages.success(
            request,
            f"Wiped {username}: {total} row(s) and {counts.get('stored_files', 0)} stored "
            f"file(s) deleted ({', '.join(f'{k} {v}' for k, v in counts.items() if v)}).",
        )
        return redirect("admin:index")
    if request.method == "POST":
        messages.error(request, "Type the username exactly to confirm.")
    return TemplateResponse(
        request,
        "admin/ingest/user_wipe.html",
        _context(
            request,
            f"Wipe all data of {username}",
            username=username,
            counts=user_wipe_preview(user=user),
        ),
    )

"""Custom console pages for ingest: action confirmations, drain, "backfill N days" on a
connection, the user overview and its "wipe all data", and "replay every raw event matching".
Each page parses the form, calls the same service as the API, and redirects with a message that
gives counts."""

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.timesince import timesince

from ingest import bulk as raw_bulk
from ingest.actions import (
    do_connection_backfill,
    do_raw_events_bulk_replay,
    do_raw_events_drain,
    do_raw_events_replay,
    do_user_wipe,
)
from ingest.drain import DRAIN_MAX_LIMIT, drain_candidates
from ingest.imports import import_job_refresh, import_job_summary
from ingest.models import RawEvent, RawEventState, TerraConnection
from ingest.selectors import DLQ_STATES, user_overview
from ingest.wipe import user_wipe_preview
from ops.access import audit_read
from ops.bulk_pages import bulk_page
from ops.console import PREVIEW_ROWS, confirmation_page, console_report, is_confirmed
from ops.errors import ApiError

REPLAY_EXPLANATION = (
    "Each row goes back to pending with a fresh attempt budget and is handed to the consumer "
    "again. Normalizers are replay-safe: processed rows converge."
)
RAW_EVENT_COLUMNS = ("id", "state", "type", "user / Terra user", "received", "error")


def _context(request, title: str, **extra) -> dict:
    from django.contrib import admin

    return {**admin.site.each_context(request), "title": title, **extra}


def _raw_event_cells(row) -> tuple:
    user = row.user.username if row.user_id else row.terra_user_id
    error = (row.process_error or "")[:80]
    return (row.pk, row.state, row.event_type, user, f"{timesince(row.received_at)} ago", error)


def raw_events_confirmation(
    request, queryset, *, action: str, title: str, explanation: str, form=None, ignored: int = 0
):
    """The confirmation of a raw-event bulk action: which rows, and what will happen."""
    rows = list(queryset.select_related("user")[:PREVIEW_ROWS])
    return confirmation_page(
        request,
        model=RawEvent,
        title=title,
        explanation=explanation,
        columns=RAW_EVENT_COLUMNS,
        rows=[_raw_event_cells(r) for r in rows],
        total=queryset.count(),
        ignored=ignored,
        submit=f"Yes, {title.lower()}",
        action=action,
        form=form,
        enabled=bool(rows),
    )


class SkipReasonForm(forms.Form):
    reason = forms.CharField(max_length=200, help_text="required: why these rows are not stored")


def replay_one_view(request, raw_event_id: int):
    """Replay… on a raw event's own page."""
    if not request.user.has_perm("ingest.change_rawevent"):
        raise PermissionDenied
    row = get_object_or_404(RawEvent, pk=raw_event_id)
    if is_confirmed(request):
        count = do_raw_events_replay(ids=[row.pk], request=request)
        console_report(request, f"Replayed {count} raw event(s) (#{row.pk}).", objects=[row])
        return redirect("admin:ingest_rawevent_change", row.pk)
    return raw_events_confirmation(
        request,
        RawEvent.objects.filter(pk=row.pk),
        action=None,
        title=f"Replay raw event {row.pk}",
        explanation=REPLAY_EXPLANATION,
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
    form = DrainForm(request.POST if is_confirmed(request) else None)
    if form.is_valid():
        result = do_raw_events_drain(**form.cleaned_data, request=request).as_dict()
        console_report(
            request,
            f"Drain picked {result['selected']} raw event(s) and enqueued {result['enqueued']}.",
            model=RawEvent,
        )
        return redirect("admin:ingest_rawevent_changelist")
    opts = form.data if form.is_bound else {}
    waiting = drain_candidates(
        include_skipped=bool(opts.get("include_skipped")),
        include_no_connection=bool(opts.get("include_no_connection")),
    ).count()
    return confirmation_page(
        request,
        model=RawEvent,
        title="Drain stuck raw events",
        explanation=(
            "The drain hands stuck rows back to the queue: unprocessed rows of the last 24 h "
            "(pending or parked) and retrying rows whose backoff is over. By default it leaves "
            "skipped rows and rows parked with no_connection_for_terra_user alone: re-running "
            f"them only spins. {waiting} row(s) match these options right now; one drain takes "
            "at most `limit`."
        ),
        submit="Yes, drain",
        form=form,
    )


class BackfillForm(forms.Form):
    days = forms.IntegerField(min_value=1, max_value=1460, initial=7)


def backfill_view(request, connection_id: int):
    if not request.user.has_perm("ingest.change_terraconnection"):
        raise PermissionDenied
    connection = get_object_or_404(TerraConnection.objects.select_related("user"), pk=connection_id)
    form = BackfillForm(request.POST if is_confirmed(request) else None)
    if form.is_valid():
        outcomes = do_connection_backfill(
            connection=connection, days=form.cleaned_data["days"], request=request
        )
        failed = sum(1 for o in outcomes if o["status"] != "requested")
        console_report(
            request,
            f"Requested {len(outcomes) - failed} of {len(outcomes)} backfill(s) of "
            f"{form.cleaned_data['days']} day(s) for {connection.terra_user_id}"
            + (f"; {failed} failed (see traces)." if failed else "."),
            objects=[connection],
            level=messages.SUCCESS if not failed else messages.WARNING,
        )
        return redirect("admin:ingest_terraconnection_change", connection.pk)
    return confirmation_page(
        request,
        model=TerraConnection,
        title=f"Backfill {connection}",
        explanation=(
            f"Ask Terra to re-send the last N days of activity, sleep, daily and body data for "
            f"{connection.provider} connection {connection.terra_user_id} of "
            f"{connection.user.username}. Terra answers at once and delivers the data by webhook "
            "over the next minutes; normalizers are replay-safe, so data already stored is not "
            "duplicated."
        ),
        submit="Request backfill",
        form=form,
        cancel_url=reverse("admin:ingest_terraconnection_change", args=[connection.pk]),
    )


def _find_user(username: str):
    from ingest.selectors import user_get

    try:
        return user_get(username=username)
    except ApiError:
        return None


def _unknown_user(request, username: str):
    """An unknown name is an operator's typo: say so on the front page, not with a 404."""
    messages.error(request, f"No user named {username!r}.")
    return redirect("admin:index")


def user_lookup_view(request):
    username = request.GET.get("username", "").strip()
    if not username:
        return redirect("admin:index")
    if _find_user(username) is None:
        return _unknown_user(request, username)
    return redirect("admin:ingest_user_overview", username)


def user_overview_view(request, username: str):
    if not request.user.has_perm("ingest.view_terraconnection"):
        raise PermissionDenied
    user = _find_user(username)
    if user is None:
        return _unknown_user(request, username)
    info = user_overview(user=user)
    imports = [import_job_summary(import_job_refresh(job=j)) for j in info["imports"]]
    audit_read(request=request, thing="user", subjects=user, resource=f"user:{user.pk}")
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


class WipeConfirmForm(forms.Form):
    confirm_username = forms.CharField(label="Type the username to confirm")

    def __init__(self, *args, username: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.username = username

    def clean_confirm_username(self):
        if self.cleaned_data["confirm_username"] != self.username:
            raise forms.ValidationError("Type the username exactly to confirm.")
        return self.username


# Counts of a wipe that are not rows deleted.
NOT_ROWS = ("stored_files", "wiped_references", "history_redacted", "terra_deauthentications")


def _wipe_summary(counts: dict[str, int]) -> tuple[int, str]:
    """(rows, "table n, …") over the row counts the confirmation lists (stored files apart)."""
    rows = {k: v for k, v in counts.items() if k not in NOT_ROWS and not k.startswith("stopped_")}
    return sum(rows.values()), ", ".join(f"{k} {v}" for k, v in rows.items() if v)


def user_wipe_view(request, username: str):
    if not request.user.has_perm("auth.delete_user"):
        raise PermissionDenied
    user = _find_user(username)
    if user is None:
        return _unknown_user(request, username)
    form = WipeConfirmForm(request.POST if is_confirmed(request) else None, username=username)
    if form.is_valid():
        user_pk = user.pk
        counts = do_user_wipe(user=user, request=request)
        rows, detail = _wipe_summary(counts)
        # By id: the message is kept in the admin's history, which must not name the user.
        console_report(
            request,
            f"Wiped user #{user_pk}: {rows} row(s) ({detail}) and "
            f"{counts.get('stored_files', 0)} stored file(s) deleted.",
            model=type(user),
        )
        return redirect("admin:index")
    preview = user_wipe_preview(user=user)
    rows, _ = _wipe_summary(preview)
    return confirmation_page(
        request,
        model=TerraConnection,
        title=f"Wipe all data of {username}",
        explanation=(
            f"This deletes {username} and every row of theirs ({rows} row(s) in all, listed "
            f"below), in one transaction, then their {preview.get('stored_files', 0)} stored "
            "file(s). It cannot be undone. An audit row records who did it and the counts."
        ),
        columns=("table", "rows that will go"),
        rows=[(k, v) for k, v in preview.items() if k != "stored_files"],
        total=rows,
        noun="row(s)",
        submit=f"Yes, wipe {username}",
        form=form,
        danger=True,
        cancel_url=reverse("admin:ingest_user_overview", args=[username]),
    )


class BulkReplayForm(forms.Form):
    """The filter of "replay every raw event matching" (ingest.bulk)."""

    state = forms.MultipleChoiceField(
        choices=RawEventState.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    type = forms.CharField(required=False, help_text="event type, e.g. sleep")
    provider = forms.CharField(required=False)
    newer_than = forms.CharField(required=False, help_text='e.g. "2h" (received in the last 2 h)')
    since = forms.CharField(required=False, help_text="received at or after, ISO (UTC)")
    until = forms.CharField(required=False, help_text="received before, ISO (UTC)")

    def filters(self) -> dict:
        data = {k: v for k, v in self.cleaned_data.items() if v not in (None, "", [])}
        return raw_bulk.bulk_filters_clean(data)


RECEIVED_TO_DURATION = {"1h": "1h", "24h": "24h", "7d": "7d"}


def bulk_initial_from_changelist(params) -> dict:
    """The raw-event list's filters, renamed to the bulk form's fields."""
    initial: dict = {}
    state = params.get("state__exact") or params.get("state")
    if state:
        initial["state"] = [state]
    elif params.get("triage") == "dlq":
        initial["state"] = list(DLQ_STATES)
    if params.get("event_type"):
        initial["type"] = params["event_type"]
    for key in ("provider", "since", "until"):
        if params.get(key):
            initial[key] = params[key]
    if params.get("received") in RECEIVED_TO_DURATION:
        initial["newer_than"] = RECEIVED_TO_DURATION[params["received"]]
    return initial


def bulk_replay_view(request):
    """Replay every raw event a filter matches: the count first, then a tracked job."""
    if request.method == "GET" and not set(request.GET) & set(raw_bulk.FILTER_KEYS):
        query = urlencode(bulk_initial_from_changelist(request.GET), doseq=True)
        if query:
            return redirect(f"{request.path}?{query}")
    return bulk_page(
        request,
        model=RawEvent,
        title="Replay every raw event matching a filter",
        explanation=REPLAY_EXPLANATION,
        form_class=BulkReplayForm,
        initial={},
        rows=lambda filters: raw_bulk.raw_events_matching(filters).select_related("user"),
        cells=_raw_event_cells,
        columns=RAW_EVENT_COLUMNS,
        start=lambda filters: do_raw_events_bulk_replay(filters=filters, request=request),
        submit="Yes, replay {count} raw event(s)",
    )

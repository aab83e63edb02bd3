"""The graphs console: definitions with their versions and tags, a drawing (server-side SVG) and
a diff between versions; bindings that can be disabled (confirmed) and enabled; runs with the
token tree, the event timeline and approve/reject for waiting `human` nodes (shown only to
those graphs.answers lets answer). Lists are read-only; every action calls a graphs service
with the request, which writes the audit row."""

import difflib
import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Max
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from graphs import answers, drawing, selectors, services
from graphs.models import GraphBinding, GraphDefinition, GraphRun
from ops.console import (
    ReadOnlyAdmin,
    confirmation_page,
    is_confirmed,
    live_context,
    staff_json,
    time_range_filter,
)
from ops.errors import ApiError
from ops.services import audit_log_write
from workflows import live


def pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@admin.register(GraphDefinition)
class GraphDefinitionAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "version",
        "status",
        "tag_list",
        "published_at",
        "short_checksum",
        "created_at",
    )
    list_filter = ("status", "name", "tag_rows__name")
    search_fields = ("=name",)
    ordering = ("name", "-version")
    change_form_template = "admin/graphs/definition_detail.html"

    @admin.display(description="checksum")
    def short_checksum(self, obj):
        return obj.checksum[:12]

    @admin.display(description="tags")
    def tag_list(self, obj):
        return ", ".join(obj.document.get("tags") or [])

    def get_urls(self):
        return [
            path(
                "<int:pk>/publish/",
                self.admin_site.admin_view(self.publish_view),
                name="graphs_graphdefinition_publish",
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        definition = get_object_or_404(GraphDefinition, pk=object_id)
        versions = list(GraphDefinition.objects.filter(name=definition.name).order_by("-version"))
        other = request.GET.get("diff")
        diff = None
        if other and other.isdigit():
            base = next((v for v in versions if v.version == int(other)), None)
            if base is not None:
                diff = difflib.HtmlDiff(wrapcolumn=70).make_table(
                    pretty(base.document).splitlines(),
                    pretty(definition.document).splitlines(),
                    f"v{base.version}",
                    f"v{definition.version}",
                    context=True,
                    numlines=3,
                )
        extra = {
            "definition": definition,
            "versions": versions,
            "drawing": mark_safe(drawing.svg(definition.document)),  # noqa: S308 - escaped inside
            "document_json": pretty(definition.document),
            "diff": mark_safe(diff) if diff else None,  # noqa: S308 - difflib escapes its cells
            "diff_with": other,
            "runs": definition.runs.select_related("instance").order_by("-id")[:20],
        }
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def publish_view(self, request, pk):
        definition = get_object_or_404(GraphDefinition, pk=pk)
        if request.method == "POST":
            try:
                services.definition_publish(
                    name=definition.name, version=definition.version, request=request
                )
                messages.success(request, f"Published {definition.name} v{definition.version}.")
            except ApiError as exc:
                audit_log_write(
                    action="graph_definition.publish",
                    resource=f"graph:{definition.name}/v{definition.version}",
                    result=exc.code,
                    request=request,
                    metadata={"error": exc.message, "ref": exc.extra.get("ref")},
                )
                messages.error(request, f"Not published: {exc.message}")
        return HttpResponseRedirect(reverse("admin:graphs_graphdefinition_change", args=[pk]))


@admin.register(GraphBinding)
class GraphBindingAdmin(ReadOnlyAdmin):
    list_display = ("name", "enabled", "definition_name", "pin", "approvers", "updated_at")
    list_filter = ("enabled",)
    list_select_related = ("approvers",)
    search_fields = ("=name", "=definition_name")
    ordering = ("name",)
    actions = ["disable_selected", "enable_selected"]

    @admin.display(description="version")
    def pin(self, obj):
        return "latest published" if obj.pinned_version is None else f"pinned v{obj.pinned_version}"

    @admin.action(description="Disable selected (new runs refused; running ones go on)")
    def disable_selected(self, request, queryset):
        chosen = list(queryset.filter(enabled=True).order_by("name"))
        if not is_confirmed(request):
            return confirmation_page(
                request,
                model=GraphBinding,
                title="Disable bindings",
                explanation="New runs of these bindings will be refused (409 disabled), child "
                "runs started by other graphs included. Runs already started go on.",
                columns=("binding", "definition", "version"),
                rows=[(b.name, b.definition_name, self.pin(b)) for b in chosen],
                ignored=queryset.count() - len(chosen),
                submit="Disable",
                action="disable_selected",
                danger=True,
            )
        return self._set_enabled(request, chosen, enabled=False)

    @admin.action(description="Enable selected")
    def enable_selected(self, request, queryset):
        return self._set_enabled(request, list(queryset.filter(enabled=False)), enabled=True)

    def _set_enabled(self, request, bindings: list, *, enabled: bool):
        for binding in bindings:
            services.binding_set_enabled(name=binding.name, enabled=enabled, request=request)
        verb = "Enabled" if enabled else "Disabled"
        self.report(request, f"{verb} {len(bindings)} binding(s).", objects=bindings)


def waiting_humans(run: GraphRun) -> list[dict]:
    """Tokens at a `human` node that are waiting for their event, with the event type, the
    answer already accepted for it (the runner has not taken it yet) and whether an answer can
    name the token (graph-run v3+; older runs: the first waiting branch of that type takes it)."""
    waiting = selectors.waiting_human_tokens(run)
    accepted = selectors.accepted_answers(run)
    targeted = run.instance.version >= answers.TARGETED_VERSION
    tokens = selectors.current_tokens(run).filter(path_id__in=list(waiting))
    return [
        {
            "token": t,
            "event_type": waiting[t.path_id],
            "targeted": targeted,
            "answer": accepted.get(t.path_id),
        }
        for t in tokens
    ]


def token_tree(run: GraphRun, tokens: list | None = None) -> list[dict]:
    """Tokens in depth-first order of the parent links, with their depth for indentation and
    their output / error as formatted JSON (never Python reprs)."""
    tokens = list(selectors.current_tokens(run)) if tokens is None else tokens
    children: dict[str, list] = {}
    for t in tokens:
        children.setdefault(t.parent_path, []).append(t)
    out, stack = [], [(t, 0) for t in reversed(children.get("", []))]
    while stack:
        token, depth = stack.pop()
        out.append(
            {
                "token": token,
                "indent": depth * 18,
                "output_json": None if token.output is None else pretty(token.output),
                "error_json": None if token.error is None else pretty(token.error),
            }
        )
        stack.extend((c, depth + 1) for c in reversed(children.get(token.path_id, [])))
    return out


def run_drawing(run: GraphRun, tokens: list) -> str:
    """The definition's drawing coloured by the run's token states, its taken path in bold."""
    nodes = run.definition.document.get("nodes", [])
    humans = {n.get("ref") for n in nodes if n.get("action", {}).get("kind") == "human"}
    states = drawing.node_states([(t.node_ref, t.status) for t in tokens], humans)
    # Taken: a transition whose source finished a visit and whose target was visited (a fan-in
    # token's parent is the fan-out's source, so parent links alone miss the join's edge).
    finished = {t.node_ref for t in tokens if t.status in ("completed", "failed", "timed_out")}
    visited = {t.node_ref for t in tokens if t.status != "cancelled"}
    taken = {
        (edge.get("from"), edge.get("to"))
        for edge in run.definition.document.get("transitions", [])
        if edge.get("from") in finished and edge.get("to") in visited
    }
    return drawing.svg(run.definition.document, states=states, taken=taken)


def run_live(run: GraphRun) -> dict:
    """The run page's poll: the engine instance's stamp plus the run's newest event number."""
    state = live.instance_live(run.instance)
    last = selectors.current_events(run).aggregate(n=Max("sequence_number"))["n"]
    return {**state, "stamp": f"{state['stamp']}|{last}"}


@admin.register(GraphRun)
class GraphRunAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "binding_name", "version_label", "status", "created_at")
    list_filter = (
        "binding_name",
        "instance__status",
        "definition__tag_rows__name",
        time_range_filter("created_at", "created (UTC)"),
    )
    search_fields = ("=run_id",)
    ordering = ("-id",)
    show_full_result_count = False
    list_select_related = ("definition", "instance")
    change_form_template = "admin/graphs/run_detail.html"

    @admin.display(description="version")
    def version_label(self, obj):
        return f"{obj.definition.name} v{obj.definition.version}"

    @admin.display(description="status")
    def status(self, obj):
        return obj.instance.status

    def get_urls(self):
        return [
            path("live.json", staff_json(self.list_live_view), name="graphs_graphruns_live"),
            path("<int:pk>/live.json", staff_json(self.live_view), name="graphs_graphrun_live"),
            path(
                "<int:pk>/decide/",
                self.admin_site.admin_view(self.decide_view),
                name="graphs_graphrun_decide",
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        run = get_object_or_404(
            GraphRun.objects.select_related("definition", "instance"), pk=object_id
        )
        tokens = list(selectors.current_tokens(run))
        extra = {
            "run": run,
            "tree": token_tree(run, tokens),
            "legend": [(style[0], style[1], style[2]) for style in drawing.STATE_STYLE.values()],
            "live": live_context(
                url=reverse("admin:graphs_graphrun_live", args=[run.pk]), state=run_live(run)
            ),
            "events": [
                {"event": e, "data_json": None if e.data is None else pretty(e.data)}
                for e in selectors.current_events(run).order_by("sequence_number")[:500]
            ],
            "context_json": pretty(run.context),
            "humans": waiting_humans(run),
            # None: this user sees Approve/Reject; else why not (not an approver, four-eyes).
            "answer_refusal": answers.refusal(answers.answerer_for(request=request), run),
            "instance_url": reverse(
                "admin:workflows_workflowinstance_change", args=[run.instance_id]
            ),
            "drawing": mark_safe(run_drawing(run, tokens)),  # noqa: S308 - escaped inside
        }
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def changelist_view(self, request, extra_context=None):
        url = reverse("admin:graphs_graphruns_live")
        context = {"live": live_context(url=url, state=live.instances_live())}
        return super().changelist_view(request, {**context, **(extra_context or {})})

    def list_live_view(self, request):
        # Graph runs are engine instances: the instances list's stamp covers them.
        if not self.has_view_permission(request):
            raise PermissionDenied
        return live.instances_live()

    def live_view(self, request, pk):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return run_live(get_object_or_404(GraphRun.objects.select_related("instance"), pk=pk))

    def decide_view(self, request, pk):
        """Approve or reject a waiting human node: sends its event type with
        {"approved": bool, "by": user, "note": text}; graphs.answers decides whether this user
        may, takes only the first answer and audits both."""
        run = get_object_or_404(GraphRun.objects.select_related("definition", "instance"), pk=pk)
        back = HttpResponseRedirect(reverse("admin:graphs_graphrun_change", args=[pk]))
        if request.method != "POST":
            return back
        event_type = request.POST.get("event_type", "")
        token = request.POST.get("token") or None
        if event_type not in {h["event_type"] for h in waiting_humans(run)}:
            messages.error(request, "No human node of this run waits for that event.")
            return back
        approved = request.POST.get("decision") == "approve"
        payload = {
            "approved": approved,
            "by": request.user.get_username(),
            "note": request.POST.get("note", "")[:500],
        }
        try:
            answers.run_answer(
                run_id=run.run_id, type=event_type, payload=payload, token=token, request=request
            )
        except ApiError as exc:
            messages.error(request, exc.message)
            return back
        messages.success(
            request,
            format_html(
                "Sent <b>{}</b> ({}){}.",
                event_type,
                "approved" if approved else "rejected",
                f" to token {token}" if token else "",
            ),
        )
        return back

"""workflows routes: the /v1/workflows API (views in workflows/http/views.py).

`_runner/tick` and `_bulk/<job>` come first: "_runner" and "_bulk" are valid workflow names. `instances/batch` and
`instances/bulk/<action>` come before `instances/<id>`, so an instance literally named "batch"
is only reachable through the list (and one named "bulk" has no action routes).
"""

from django.urls import path

from workflows.http import bulk_views, views

INSTANCE = "v1/workflows/<str:name>/instances/<str:instance_id>"

urlpatterns = [
    path("v1/workflows", views.WorkflowListView.as_view(), name="workflows-list"),
    path("v1/workflows/_runner/tick", views.RunnerTickView.as_view(), name="workflows-tick"),
    path(
        "v1/workflows/_bulk/<int:job_id>",
        bulk_views.BulkJobView.as_view(),
        name="workflows-bulk-job",
    ),
    path("v1/workflows/<str:name>", views.WorkflowDetailView.as_view(), name="workflows-get"),
    *[
        path(
            f"v1/workflows/<str:name>/schedules/{action}",
            views.SCHEDULE_VIEWS[action].as_view(),
            name=f"workflows-schedules-{action}",
        )
        for action in views.SCHEDULE_VIEWS
    ],
    path(
        "v1/workflows/<str:name>/instances",
        views.InstanceListCreateView.as_view(),
        name="workflows-instances",
    ),
    path(
        "v1/workflows/<str:name>/instances/batch",
        views.InstanceBatchView.as_view(),
        name="workflows-instances-batch",
    ),
    path(
        "v1/workflows/<str:name>/instances/bulk/<str:action>",
        bulk_views.BulkActionView.as_view(),
        name="workflows-instances-bulk",
    ),
    path(INSTANCE, views.InstanceDetailView.as_view(), name="workflows-instance"),
    *[
        path(
            f"{INSTANCE}/{action.replace('_', '-')}",
            views.ACTION_VIEWS[action].as_view(),
            name=f"workflows-instance-{action}",
        )
        for action in views.ACTION_VIEWS
    ],
    path(f"{INSTANCE}/events", views.InstanceEventView.as_view(), name="workflows-instance-events"),
    path(
        f"{INSTANCE}/history",
        views.InstanceHistoryView.as_view(),
        name="workflows-instance-history",
    ),
    path(
        "v1/workflows/<str:name>/versions/active",
        views.ActiveVersionView.as_view(),
        name="workflows-version-active",
    ),
    path(
        "v1/workflows/<str:name>/versions/<int:version>/activate",
        views.ActivateVersionView.as_view(),
        name="workflows-version-activate",
    ),
    *[
        path(
            f"v1/workflows/<str:name>/{switch}",
            views.WorkflowSwitchView.as_view(switch=switch, action=switch),
            name=f"workflows-{switch}",
        )
        for switch in ("disable", "enable")
    ],
]

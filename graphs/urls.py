"""graphs routes: the /v1/graphs API (views in graphs/http/views.py)."""

from django.urls import path

from graphs.http import views

DEFINITION = "v1/graphs/definitions/<str:name>/versions/<int:version>"

urlpatterns = [
    path(
        "v1/graphs/definitions", views.DefinitionListCreateView.as_view(), name="graphs-definitions"
    ),
    path(DEFINITION, views.DefinitionVersionView.as_view(), name="graphs-definition"),
    path(
        f"{DEFINITION}/publish",
        views.DefinitionPublishView.as_view(),
        name="graphs-definition-publish",
    ),
    path("v1/graphs/bindings", views.BindingCreateView.as_view(), name="graphs-bindings"),
    path(
        "v1/graphs/bindings/<str:name>/pin",
        views.BindingPinView.as_view(),
        name="graphs-binding-pin",
    ),
    path(
        "v1/graphs/bindings/<str:name>/approvers",
        views.BindingApproversView.as_view(),
        name="graphs-binding-approvers",
    ),
    path(
        "v1/graphs/bindings/<str:name>/disable",
        views.BindingDisableView.as_view(),
        name="graphs-binding-disable",
    ),
    path(
        "v1/graphs/bindings/<str:name>/enable",
        views.BindingEnableView.as_view(),
        name="graphs-binding-enable",
    ),
    path(
        "v1/graphs/bindings/<str:name>/runs",
        views.RunCreateView.as_view(),
        name="graphs-runs-create",
    ),
    path("v1/graphs/runs", views.RunListView.as_view(), name="graphs-runs"),
    path("v1/graphs/runs/<str:run_id>", views.RunDetailView.as_view(), name="graphs-run"),
    path(
        "v1/graphs/runs/<str:run_id>/events",
        views.RunEventsView.as_view(),
        name="graphs-run-events",
    ),
]

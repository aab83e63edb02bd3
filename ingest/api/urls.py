"""/v1 user and operator API routes for ingest."""

from django.urls import path

from ingest.api import admin_views, bulk_views, user_views

urlpatterns = [
    path("v1/connect", user_views.ConnectView.as_view(), name="v1-connect"),
    path("v1/me", user_views.MeView.as_view(), name="v1-me"),
    path("v1/import", user_views.ImportView.as_view(), name="v1-import"),
    path("v1/sync", user_views.SyncView.as_view(), name="v1-sync"),
    path("v1/me/export", user_views.ExportView.as_view(), name="v1-me-export"),
    path("v1/admin/dlq", admin_views.DlqView.as_view(), name="v1-admin-dlq"),
    path(
        "v1/admin/raw-events/<int:raw_event_id>",
        admin_views.RawEventView.as_view(),
        name="v1-admin-raw-event",
    ),
    path(
        "v1/admin/raw-events/<int:raw_event_id>/replay",
        admin_views.RawEventReplayView.as_view(),
        name="v1-admin-raw-event-replay",
    ),
    path("v1/admin/replay", admin_views.ReplayView.as_view(), name="v1-admin-replay"),
    path(
        "v1/admin/raw-events/bulk-replay",
        bulk_views.BulkReplayView.as_view(),
        name="v1-admin-raw-events-bulk-replay",
    ),
    path(
        "v1/admin/bulk-jobs/<int:job_id>",
        bulk_views.BulkJobView.as_view(),
        name="v1-admin-bulk-job",
    ),
    path("v1/admin/drain", admin_views.DrainView.as_view(), name="v1-admin-drain"),
    path(
        "v1/admin/users/<str:username>",
        admin_views.UserOverviewView.as_view(),
        name="v1-admin-user",
    ),
    path(
        "v1/admin/users/<str:username>/wipe",
        admin_views.UserWipeView.as_view(),
        name="v1-admin-user-wipe",
    ),
    path("v1/admin/traces", admin_views.TracesView.as_view(), name="v1-admin-traces"),
]

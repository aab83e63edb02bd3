"""ingest routes: the Terra webhook (ingest.webhook_urls) and the /v1 API (ingest.api.urls)."""

from django.urls import include, path

urlpatterns = [
    path("", include("ingest.webhook_urls")),
    path("", include("ingest.api.urls")),
]

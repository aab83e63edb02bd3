"""ingest routes: the Terra webhook on every path Terra's dashboard has been pointed at, one
handler (the WebhookShortcut middleware serves the same paths without routing), and the /v1 API."""

from django.urls import include, path

from ingest.webhook import WEBHOOK_PATHS, terra_webhook

webhook_urlpatterns = [
    path(
        route.lstrip("/"),
        terra_webhook,
        **({"name": "terra-webhook"} if route == "/webhook/terra" else {}),
    )
    for route in sorted(WEBHOOK_PATHS, key=len, reverse=True)
]
urlpatterns = [*webhook_urlpatterns, path("", include("ingest.api.urls"))]

"""Terra webhook routes: every path Terra's dashboard has been pointed at, one handler."""

from django.urls import path

from ingest.webhook import terra_webhook

urlpatterns = [
    path("webhook/terra", terra_webhook, name="terra-webhook"),
    path("webhook", terra_webhook),
    path("terra", terra_webhook),
    path("", terra_webhook),
]

"""ops' routes: the orchestrator probes and the Prometheus scrape."""

from django.urls import path

from ops import health, metrics

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
]

"""ops' routes: the orchestrator probes."""

from django.urls import path

from ops import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
]

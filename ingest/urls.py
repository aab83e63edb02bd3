"""ingest routes."""

urlpatterns: list = []

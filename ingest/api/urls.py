"""/v1 user and operator API routes for ingest."""

urlpatterns: list = []

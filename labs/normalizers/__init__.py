"""Lab-report and body normalizers; importing this package registers them with ingest.registry."""

from labs.normalizers import body, lab_report  # noqa: F401

"""Lab-report and body normalizers (registered with ingest.registry on import)."""

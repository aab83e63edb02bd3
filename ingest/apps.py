from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Ingest (Terra)"

    def ready(self):
        # Importing the package registers the built-in normalizers.
        from ingest import normalizers  # noqa: F401

from django.apps import AppConfig


class LabsConfig(AppConfig):
    name = "labs"
    verbose_name = "Labs"

    def ready(self):
        # Registers the lab_report and body normalizers with ingest's registry.
        from labs import normalizers  # noqa: F401

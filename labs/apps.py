"""labs app: registers its normalizers and its per-user tables with ingest's registries."""

from django.apps import AppConfig


class LabsConfig(AppConfig):
    name = "labs"
    verbose_name = "Labs"

    def ready(self):
        # ingest never imports labs: labs plugs itself in here.
        from ingest.registry import UserTable, register_user_table
        from labs import graph_actions, normalizers  # noqa: F401  (graph actions; lab_report, body)
        from labs.models import Biomarker, BiomarkerWide, LabUpload

        # Wipe order is registration order: biomarkers point at their upload, so they go first.
        register_user_table(UserTable("biomarkers", Biomarker))
        register_user_table(
            UserTable("lab_uploads", LabUpload, stored_files=lambda row: [row.storage_key])
        )
        # A view: synced, never wiped itself (it empties when biomarkers are wiped).
        register_user_table(UserTable("biomarkers_wide", BiomarkerWide, wipe=False))

        # Lab reports come back naming Terra's upload id (as reference_id): the wipe and the
        # export find those deliveries, and the wipe remembers them as wiped, by these.
        from ingest.userdata import TERRA_REFERENCE
        from ops.userdata import identifiers_register

        def upload_references(user) -> dict:
            rows = LabUpload.objects.filter(user=user).values_list("pk", "terra_upload_id")
            return {TERRA_REFERENCE: [str(v) for row in rows for v in row if v]}

        identifiers_register(upload_references)

        from labs import userdata

        userdata.register()  # the wipe reaches work done for uploads before it had a subject

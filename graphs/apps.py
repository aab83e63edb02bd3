"""graphs app: declarative graph workflows on top of `workflows` (graphs → workflows, never back).

The interpreter workflow (`graph-run`) lives in graphs/workflows.py, which the engine's
autodiscovery imports like any app's workflows module.
"""

from django.apps import AppConfig


class GraphsConfig(AppConfig):
    name = "graphs"
    verbose_name = "Graph workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from graphs import actions  # noqa: F401 - the built-in action kinds

        # The wipe and the export reach the runs about a user.
        from graphs.userdata import register

        register()

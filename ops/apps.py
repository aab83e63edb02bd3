from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self):
        from django.contrib import admin

        # The console's front page lives in ops' own templates (so a wheel ships it) under a
        # name of its own: an app template named admin/index.html would lose to the admin app's.
        admin.site.index_template = "admin/ops/index.html"

"""demo app: in demo mode (no TERRA_API_KEY) the simulator answers the Terra client and serves
the simulated payload bucket, in every process that loads Django (web, qcluster, runner)."""

from django.apps import AppConfig
from django.conf import settings


class DemoConfig(AppConfig):
    name = "demo"
    verbose_name = "Demo"

    def ready(self):
        if settings.TERRA_DEMO_MODE:
            from demo.simulator import install

            install()

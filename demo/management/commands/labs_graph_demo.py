"""`manage.py labs_graph_demo --hook-url URL`: publish the lab-out-of-range example graph and
start one demo run (demo/graph_demo.py). `make run` calls it."""

from django.core.management.base import BaseCommand

from demo.graph_demo import start_demo_run


class Command(BaseCommand):
    help = "Publish the lab-out-of-range example graph and start a demo run."

    def add_arguments(self, parser):
        parser.add_argument("--hook-url", required=True, help="the local webhook stand-in")
        parser.add_argument("--user", default="demo")

    def handle(self, *args, hook_url, user, **options):
        run = start_demo_run(hook_url=hook_url, username=user)
        self.stdout.write(f"graph run {run.run_id} ({run.binding_name} v{run.definition.version})")

"""Mint an operator API key and print it once."""

from django.core.management.base import BaseCommand, CommandError

from ops.models import ApiKey
from ops.services import api_key_create


class Command(BaseCommand):
    help = (
        "Create an operator API key (sent as X-Admin-Key) and print it once; only its hash is kept.\n"
        "Scopes: ingest:admin, workflows:read, workflows:create, workflows:manage, workflows:events, "
        "workflows:tick, graphs:read, graphs:write, graphs:run, graphs:approve (answer the human "
        "nodes of every binding), graphs:approve:<binding> (of one binding), metrics:read, or * "
        "for all."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="unique name, e.g. oncall-laptop")
        parser.add_argument(
            "--scopes", default="", help="comma-separated, e.g. ingest:admin,workflows:read"
        )

    def handle(self, *args, name, scopes, **options):
        if ApiKey.objects.filter(name=name).exists():
            raise CommandError(f"an API key named {name!r} exists already")
        scope_list = [s.strip() for s in scopes.split(",") if s.strip()]
        _, raw = api_key_create(name=name, scopes=scope_list)
        self.stdout.write(raw)

"""`manage.py terra_replay ID [ID ...]`: re-enqueue raw events whatever their state (audited)."""

from django.core.management.base import BaseCommand, CommandError

from ingest.services import raw_events_replay


class Command(BaseCommand):
    help = "Reset the given raw events to pending and enqueue them again."

    def add_arguments(self, parser):
        parser.add_argument("ids", nargs="+", type=int)

    def handle(self, *args, ids, **options):
        count = raw_events_replay(ids=ids, actor="command:terra_replay")
        missing = len(set(ids)) - count
        self.stdout.write(
            f"replayed {count} raw event(s)" + (f", {missing} not found" if missing else "")
        )
        if count == 0:
            raise CommandError("no such raw events")

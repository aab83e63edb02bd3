"""`manage.py terra_replay ID [ID ...]`: re-enqueue raw events whatever their state (audited).
Exits non-zero when any id is unknown (the ones found are still replayed)."""

from django.core.management.base import BaseCommand, CommandError

from ingest.actions import do_raw_events_replay


class Command(BaseCommand):
    help = "Reset the given raw events to pending and enqueue them again."

    def add_arguments(self, parser):
        parser.add_argument("ids", nargs="+", type=int)

    def handle(self, *args, ids, **options):
        count = do_raw_events_replay(ids=ids, actor="command:terra_replay")
        missing = len(set(ids)) - count
        self.stdout.write(f"replayed {count} raw event(s)")
        if missing:
            raise CommandError(f"{missing} of the given raw event ids do not exist")

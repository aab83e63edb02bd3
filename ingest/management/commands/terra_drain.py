"""`manage.py terra_drain [--inline]`: pick up stuck raw events (the drain's filters) and enqueue
them, or with --inline normalize them here and print counts per outcome."""

from django.core.management.base import BaseCommand

from ingest.actions import do_raw_events_drain
from ingest.drain import DRAIN_MAX_LIMIT


class Command(BaseCommand):
    help = "Re-run unprocessed raw events of the last 24 h (50 per run by default)."

    def add_arguments(self, parser):
        parser.add_argument("--inline", action="store_true", help="normalize in this process")
        parser.add_argument(
            "--limit", type=int, default=50, help=f"rows per run (max {DRAIN_MAX_LIMIT})"
        )
        parser.add_argument("--include-skipped", action="store_true")
        parser.add_argument(
            "--include-no-connection",
            action="store_true",
            help="also rows parked because their Terra user has no connection",
        )

    def handle(self, *args, inline, limit, include_skipped, include_no_connection, **options):
        result = do_raw_events_drain(
            limit=limit,
            include_skipped=include_skipped,
            include_no_connection=include_no_connection,
            inline=inline,
            actor="command:terra_drain",
        )
        self.stdout.write(f"selected {result.selected}")
        if inline:
            for outcome, count in sorted(result.outcomes.items()):
                self.stdout.write(f"  {outcome}: {count}")
        else:
            self.stdout.write(f"  enqueued: {result.enqueued}")

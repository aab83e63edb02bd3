"""`manage.py terra_reconcile [--days N] [--user NAME]`: ask Terra to re-send recent data."""

from django.core.management.base import BaseCommand, CommandError

from ingest.connections import RECONCILE_DAYS, connections_backfill_recent, connections_reconcile
from ingest.errors import UserNotFound
from ingest.selectors import user_get


class Command(BaseCommand):
    help = (
        "Request a Terra backfill (activity, sleep, daily, body; delivered by webhook) of the "
        f"last N days (default {RECONCILE_DAYS}) for every active connection, or only NAME's. "
        "With --user it first reconciles NAME's connections against Terra's subscription list. "
        "One failing connection is reported and the others go on. This is what the daily "
        "terra-reconcile schedule runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=RECONCILE_DAYS, help="1…1460")
        parser.add_argument("--user", help="only this username")

    def handle(self, *args, days, user, **options):
        if not 1 <= days <= 1460:
            raise CommandError("--days must be from 1 to 1460")
        target = None
        if user:
            try:
                target = user_get(username=user)
            except UserNotFound as exc:
                raise CommandError(exc.message) from None
            result = connections_reconcile(user=target)
            self.stdout.write(f"subscriptions: {result.as_dict()}")
        summary = connections_backfill_recent(days=days, user=target)
        self.stdout.write(
            f"connections {summary['connections']}: {summary['requested']} backfill requests "
            f"sent, {summary['failed']} failed ({days} days)"
        )
        if summary["failed"]:
            self.stderr.write("some requests failed: see the backfill_failed traces")

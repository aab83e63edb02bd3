"""`manage.py terra_replay ID [ID ...]`: re-enqueue raw events whatever their state (audited).
Exits non-zero when any id is unknown (the ones found are still replayed).

`manage.py terra_replay --state dead --type sleep --since 2026-11-27T02:00`: every raw event a
filter matches, as a bulk job run here chunk by chunk, with one audit row (`--dry-run` counts)."""

from django.core.management.base import BaseCommand, CommandError

from ingest import bulk as raw_bulk
from ingest.actions import do_raw_events_bulk_replay, do_raw_events_replay
from ops.errors import ApiError

ACTOR = "command:terra_replay"


class Command(BaseCommand):
    help = "Reset the given raw events (or those a filter matches) to pending and enqueue them."

    def add_arguments(self, parser):
        parser.add_argument("ids", nargs="*", type=int)
        parser.add_argument("--state", action="append", help="repeatable, e.g. dead")
        parser.add_argument("--type", dest="event_type", help="event type, e.g. sleep")
        parser.add_argument("--provider")
        parser.add_argument("--since", help="received at or after (ISO date-time)")
        parser.add_argument("--until", help="received before (ISO date-time)")
        parser.add_argument("--newer-than", help='e.g. "2h"')
        parser.add_argument("--dry-run", action="store_true", help="only count (with a filter)")

    def handle(self, *args, ids, **options):
        wanted = {
            "state": options["state"],
            "type": options["event_type"],
            "provider": options["provider"],
            "since": options["since"],
            "until": options["until"],
            "newer_than": options["newer_than"],
        }
        filters = {key: value for key, value in wanted.items() if value}
        if filters and ids:
            raise CommandError("give ids or a filter, not both")
        if filters:
            try:
                self.by_filter(filters, dry_run=options["dry_run"])
            except ApiError as exc:
                raise CommandError(f"{exc.code}: {exc.message}") from None
            return
        if not ids:
            raise CommandError("give raw event ids, or a filter (--state, --type, --since …)")
        count = do_raw_events_replay(ids=ids, actor=ACTOR)
        missing = len(set(ids)) - count
        self.stdout.write(f"replayed {count} raw event(s)")
        if missing:
            raise CommandError(f"{missing} of the given raw event ids do not exist")

    def by_filter(self, filters: dict, *, dry_run: bool) -> None:
        if dry_run:
            count = raw_bulk.raw_events_matching(raw_bulk.bulk_filters_clean(filters)).count()
            self.stdout.write(f"would replay {count} raw event(s)")
            return
        job = do_raw_events_bulk_replay(filters=filters, actor=ACTOR, inline=True)
        self.stdout.write(
            f"bulk job {job.pk}: {job.state}, replayed {job.done} of {job.total} raw event(s)"
        )

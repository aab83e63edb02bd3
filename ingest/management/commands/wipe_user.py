"""`manage.py wipe_user NAME [--yes]`: delete a user and all their data (shows counts first)."""

from django.core.management.base import BaseCommand, CommandError

from ingest.actions import do_user_wipe
from ingest.errors import UserNotFound
from ingest.selectors import user_get
from ingest.wipe import user_wipe_preview


class Command(BaseCommand):
    help = (
        "Delete user NAME with every row of theirs (typed tables, labs, raw events, traces, "
        "connections, imports, tokens) in one transaction, then their stored files. Prints the "
        "per-table counts and asks for confirmation unless --yes. Audit-logged."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, *args, username, yes, **options):
        try:
            user = user_get(username=username)
        except UserNotFound as exc:
            raise CommandError(exc.message) from None
        preview = user_wipe_preview(user=user)
        for table, count in preview.items():
            self.stdout.write(f"  {table:20} {count}")
        if not yes:
            answer = input(f"Delete {username} and everything above? Type the username: ")
            if answer.strip() != username:
                raise CommandError("aborted: nothing deleted")
        counts = do_user_wipe(user=user, actor="command:wipe_user")
        self.stdout.write(f"wiped {username}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))

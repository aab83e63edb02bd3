"""Mint a bearer token for a user of the user-facing API and print it once."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from ops.services import user_get_or_create, user_token_create


class Command(BaseCommand):
    help = "Print a new bearer token for USERNAME (Authorization: Bearer <token>); --create makes the user."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user if missing")

    def handle(self, *args, username, create, **options):
        try:
            user = user_get_or_create(username=username, create=create)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {username!r} (use --create)") from None
        _, raw = user_token_create(user=user)
        self.stdout.write(raw)

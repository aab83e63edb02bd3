"""`manage.py export_user NAME [--out FILE]`: everything stored about a user as one zip archive."""

import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from ingest.errors import UserNotFound
from ingest.export import user_export_write
from ingest.selectors import user_get
from ops.access import audit_read

ACTOR = "command:export_user"


class Command(BaseCommand):
    help = (
        "Write everything stored about user NAME (connections, typed rows, raw events with their "
        "exact bodies, lab uploads with their files, biomarkers, imports …) to one zip archive, "
        "the same as GET /v1/me/export gives the user. Audit-logged as export.read."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--out", help="archive to write (default: <NAME>-export-<YYYYMMDD>.zip here)"
        )

    def handle(self, *args, username, out, **options):
        try:
            user = user_get(username=username)
        except UserNotFound as exc:
            raise CommandError(exc.message) from None
        target = Path(out or f"{username}-export-{timezone.now():%Y%m%d}.zip")
        # Written next to the target, renamed when complete: never half an archive at `target`.
        handle, partial = tempfile.mkstemp(dir=target.parent or ".", suffix=".partial")
        try:
            with os.fdopen(handle, "wb") as archive:
                manifest = user_export_write(user=user, out=archive)
            audit_read(thing="export", subjects=user, actor=ACTOR, resource=f"user:{user.pk}")
            os.replace(partial, target)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
        for key, table in manifest["tables"].items():
            self.stdout.write(f"  {key:20} {table['rows']} row(s), {table['files']} file(s)")
        if manifest["missing_files"]:
            self.stdout.write(f"  missing stored files: {len(manifest['missing_files'])}")
        self.stdout.write(f"wrote {target} ({target.stat().st_size} bytes)")

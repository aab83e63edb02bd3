"""A user's data as one zip archive (GET /v1/me/export, `manage.py export_user`): every source of
ops.userdata that exports, as JSON lines per table, with the stored files and the exact bodies of
deliveries, a manifest and a README. Written as a stream: rows are read in chunks, files and
bodies copied in pieces, so memory stays flat whatever the data's size.
docs/health-data.md › Export tells the layout."""

import json
import logging
import zipfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from django.core.files.storage import default_storage
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from ops.throttling import window_count
from ops.userdata import Subject, UserData, subject_of, user_data_sources

log = logging.getLogger(__name__)

FORMAT, VERSION = "vitalflow-export", 1
ROW_CHUNK = 100  # rows read per query (a typed row's `raw` may hold 60 KB of samples)
COPY_PIECE = 1024 * 1024  # bytes of a stored file copied at a time
WRITE_BUFFER = 256 * 1024  # JSON lines gathered before each write into the archive
# Exports per user per hour: each reads everything the user has.
EXPORTS_PER_HOUR = 6

README = """vitalflow export
================

Everything vitalflow stores about one user, as of `created_at` in manifest.json.

- manifest.json    what is here: each table's file and row count, files and missing files
- user.json        the account (username, email, names, when it joined, last login)
- tables/<t>.jsonl one JSON object per line per row of table <t>: its columns by name
                   (`<name>_id` for a reference to another row), times in ISO 8601 (UTC)
- files/<t>/...    files that belong to rows of table <t>: files/raw_events/<id>.json is the
                   exact body of that delivery as Terra sent it (the JSON of all but deliveries
                   that could not be parsed, kept as they came); files/lab_uploads/<upload id>.<ext>
                   is the lab report as stored (location and device metadata removed on upload)
"""


def export_allowed(*, user) -> float | None:
    """Spend one of the user's exports this hour: None when allowed, else seconds to wait."""
    count, remaining = window_count(f"export:user:{user.pk}", 3600)
    if count is not None and count > EXPORTS_PER_HOUR:
        return max(remaining, 1.0)
    return None


def _columns(source: UserData) -> list[models.Field]:
    return [
        f
        for f in source.model._meta.concrete_fields
        if f.name not in source.omit and not isinstance(f, models.BinaryField)
    ]


def _lines(rows: Iterable, columns: list[models.Field]) -> Iterator[bytes]:
    buffer: list[str] = []
    size = 0
    for row in rows:
        line = json.dumps(
            {f.attname: f.value_from_object(row) for f in columns},
            cls=DjangoJSONEncoder,
            ensure_ascii=False,
        )
        buffer.append(line)
        size += len(line) + 1
        if size >= WRITE_BUFFER:
            yield ("\n".join(buffer) + "\n").encode()
            buffer, size = [], 0
    if buffer:
        yield ("\n".join(buffer) + "\n").encode()


def _stored_chunks(key: str) -> Iterator[bytes]:
    stored = default_storage.open(key, "rb")  # now: a missing file raises before its entry

    def pieces():
        with stored:
            while chunk := stored.read(COPY_PIECE):
                yield chunk

    return pieces()


def _attachments(source: UserData, row) -> list:
    found = list(source.attachments(row)) if source.attachments is not None else []
    if source.stored_files is not None:
        found += [
            (key.rsplit("/", 1)[-1], lambda key=key: _stored_chunks(key))
            for key in source.stored_files(row)
            if key
        ]
    return found


def _write_source(archive: zipfile.ZipFile, source: UserData, subject: Subject) -> dict:
    columns = _columns(source)
    deferred = [f.name for f in source.model._meta.concrete_fields if f not in columns]
    rows = source.rows(subject).defer(*deferred).order_by("pk")
    pending: list = []  # a zip takes one entry at a time: the files follow the table

    def counted(iterator):
        for row in iterator:
            pending.extend(_attachments(source, row))
            yield row

    path = f"tables/{source.key}.jsonl"
    count = 0
    with archive.open(path, "w", force_zip64=True) as sink:
        for chunk in _lines(counted(rows.iterator(chunk_size=ROW_CHUNK)), columns):
            sink.write(chunk)
            count += chunk.count(b"\n")
    missing = []
    for name, chunks in pending:
        target = f"files/{source.key}/{name}"
        try:
            pieces = chunks()
            with archive.open(target, "w", force_zip64=True) as sink:
                for piece in pieces:
                    sink.write(piece)
        except (FileNotFoundError, OSError):
            log.warning("export: a stored file of %s is missing", source.key)
            missing.append(target)
    return {"file": path, "rows": count, "files": len(pending) - len(missing), "missing": missing}


def _account(user) -> dict:
    return {
        "id": user.pk,
        "username": user.get_username(),
        "email": getattr(user, "email", ""),
        "first_name": getattr(user, "first_name", ""),
        "last_name": getattr(user, "last_name", ""),
        "date_joined": getattr(user, "date_joined", None),
        "last_login": getattr(user, "last_login", None),
    }


def user_export_write(*, user, out: BinaryIO) -> dict:
    """Write the archive of everything stored about `user` to `out` (a file opened for binary
    writing; it need not be seekable). Returns the manifest."""
    subject = subject_of(user)
    manifest: dict = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": timezone.now(),
        "user": "user.json",
        "tables": {},
        "missing_files": [],
    }
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        archive.writestr("README.txt", README)
        archive.writestr("user.json", json.dumps(_account(user), cls=DjangoJSONEncoder, indent=2))
        for source in user_data_sources():
            if source.export:
                written = _write_source(archive, source, subject)
                manifest["missing_files"] += written.pop("missing")
                manifest["tables"][source.key] = written
        archive.writestr("manifest.json", json.dumps(manifest, cls=DjangoJSONEncoder, indent=2))
    return manifest

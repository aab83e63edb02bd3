"""Wiping a user: in one transaction, stop their live work, delete every row that carries their
data (ops.userdata's sources, in registration order), remember their Terra references as wiped
(digests only: ingest.wiped), replace their identifiers in operator history, and delete the user;
then their stored files once the rows are gone for good (a rolled-back wipe must not have lost
the files). docs/health-data.md › Erasure."""

import logging

from django.core.files.storage import default_storage
from django.db import transaction

from ingest.userdata import TERRA_REFERENCE, TERRA_USER_ID
from ingest.wiped import wiped_references_record
from ops.userdata import (
    Subject,
    mentions_redact,
    subject_of,
    user_data_sources,
    user_data_stop,
)

log = logging.getLogger(__name__)
# Keeps each DELETE ... IN (...) under SQLite's bound-parameter limit.
DELETE_BATCH = 5000


def user_wipe_preview(*, user) -> dict[str, int]:
    """Rows per source a wipe would delete, the user, and their stored files: the keys user_wipe
    returns for them, so the confirmation page and the result message count the same things."""
    subject = subject_of(user)
    counts = {s.key: s.rows(subject).count() for s in user_data_sources() if s.wipe}
    counts["users"] = 1
    counts["stored_files"] = len(_stored_files(subject))
    return counts


def _stored_files(subject: Subject) -> list[str]:
    keys: list[str] = []
    for source in user_data_sources():
        if source.wipe and source.stored_files is not None:
            for row in source.rows(subject).iterator():
                keys += [k for k in source.stored_files(row) if k]
    return keys


def _delete_files(keys: list[str]) -> None:
    for key in keys:
        try:
            default_storage.delete(key)
        except Exception:  # one stuck file must not keep the others
            log.exception("could not delete a stored file of a wiped user")


def user_wipe(*, user) -> dict[str, int]:
    """Delete all of `user`'s data and the user; returns rows deleted per source, the user, their
    stored files (deleted after commit), things stopped, references remembered as wiped and
    history rows redacted (ingest.actions audits the operator's wipe)."""
    subject = subject_of(user)
    counts: dict[str, int] = {}
    with transaction.atomic():
        stopped = user_data_stop(subject)
        files = _stored_files(subject)
        for source in user_data_sources():
            if not source.wipe:
                continue
            # Ids first: a later source's query (traces by raw event) must not be re-resolved
            # after the rows it points at are gone; only the key is loaded (never a body).
            ids = list(source.rows(subject).values_list("pk", flat=True))
            model = source.model
            for start in range(0, len(ids), DELETE_BATCH):
                model.objects.filter(pk__in=ids[start : start + DELETE_BATCH]).only("pk").delete()
            counts[source.key] = len(ids)
        references = subject.ids(TERRA_USER_ID) | subject.ids(TERRA_REFERENCE)
        wiped = wiped_references_record(values=references)
        redacted = mentions_redact(subject=subject)
        user.delete()
        counts["users"] = 1
        counts["stored_files"] = len(files)
        counts.update({f"stopped_{name}": n for name, n in stopped.items()})
        counts["wiped_references"] = wiped
        counts["history_redacted"] = redacted
        transaction.on_commit(lambda: _delete_files(files))
    log.info("wiped user #%s: %s", subject.pk, counts)
    return counts

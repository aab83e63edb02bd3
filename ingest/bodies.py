"""A claimed row's payload: its body loaded whole, or, for a big delivery of a type whose
normalizer declared what it reads, streamed from the database in pieces through
ingest.terra.projection, which keeps only those paths."""

import functools
import logging
from collections.abc import Iterator

from ingest.models import RawEvent
from ingest.registry import item_reads_for
from ingest.store import consumer as store
from ingest.store.consumer import INLINE_BODY_BYTES
from ingest.terra.projection import payload_projected, payload_trie, reads_trie

log = logging.getLogger(__name__)

# A big body is read in pieces of this size (≥ INLINE_BODY_BYTES): few enough queries
# (PostgreSQL decompresses a compressed body from its start up to each piece), small enough
# that memory stays flat.
BODY_PIECE_BYTES = 2 * 1024 * 1024


@functools.lru_cache(maxsize=64)
def _trie(reads: tuple[str, ...]) -> dict:
    return payload_trie(reads_trie(reads))


def _piece(pk: int, start: int) -> tuple[bytes, int]:
    found = store.body_piece(pk, start, BODY_PIECE_BYTES)
    if found is None:
        raise RawEvent.DoesNotExist(f"raw event {pk}")
    return found


def _pieces(pk: int, first: bytes, length: int) -> Iterator[bytes]:
    """The stored body piece by piece, one query each, so a big body streams through the
    parser without ever being whole in this process (nor hex-encoded whole in a PostgreSQL
    result: loading a 40 MB body at once peaks at +245 MB). Bodies never change once stored."""
    yield first
    start = len(first) + 1
    while start <= length:
        piece, _ = _piece(pk, start)
        if not piece:
            return
        yield piece
        start += len(piece)


def body_chunks(pk: int) -> Iterator[bytes]:
    """A stored body as it was received, BODY_PIECE_BYTES at a time (the export streams it)."""
    first, length = _piece(pk, 1)
    yield from _pieces(pk, first, length)


def with_body(row: RawEvent) -> RawEvent:
    """Load a body the claim left out (too big to travel with the batch)."""
    if row.body is None:
        row.body = RawEvent.objects.filter(pk=row.pk).values_list("body", flat=True).get()
    return row


def with_payload(row: RawEvent) -> bool:
    """Make the row's payload readable; True when its body was parsed as a stream.

    A body over INLINE_BODY_BYTES of a type whose normalizer declared the paths it reads
    streams from the database: a 40 MB delivery of samples never becomes hundreds of MB of
    Python objects. Any other body is loaded and parsed whole; so is one the stream cannot
    parse, which is then classified (skipped:unparseable:<reason>) as any other."""
    reads = item_reads_for(row.event_type)
    if row.body is not None or reads is None:
        with_body(row)
        return False
    first, length = _piece(row.pk, 1)
    if length <= INLINE_BODY_BYTES:
        row.body = first  # the whole body (a piece holds more than INLINE_BODY_BYTES)
        return False
    try:
        row.payload_provide(payload_projected(_pieces(row.pk, first, length), _trie(reads)))
        return True
    except ValueError:
        log.info("raw event %s: not one JSON object for the stream parse", row.pk)
    del first
    with_body(row)
    return False


def drop_body(row: RawEvent) -> None:
    """Done with a row: drop its body and parsed payload before the next row's."""
    row.body = None
    row.__dict__.pop("_payload_cache", None)

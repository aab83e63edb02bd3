"""Normalizers by event type. Apps register theirs in AppConfig.ready(), so ingest never imports
them (labs registers `lab_report` and `body`)."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.models import RawEvent


@dataclass(frozen=True)
class NormalizeResult:
    """ok=False parks the row with `error` (with `defer`, it was not run at all and goes again
    in a few seconds, the attempt not counted); `skipped` acknowledges it without storing
    anything. `detail` goes into the outcome trace (unmapped items, absent fields, stale
    columns)."""

    ok: bool
    rows: int = 0
    skipped: str | None = None
    error: str | None = None
    detail: dict | None = None
    defer: bool = False


class ValueOutOfRange(ValueError):
    """A delivered value can never be stored in its column (steps = 1e20 in an integer
    column). Retrying cannot help: the consumer parks the row at once with this message."""


Normalizer = Callable[["RawEvent"], NormalizeResult]
_normalizers: dict[str, Normalizer] = {}
_item_reads: dict[str, tuple[str, ...]] = {}
_outside_transaction: set[str] = set()


def register(
    *event_types: str, reads: Iterable[str] | None = None, in_transaction: bool = True
) -> Callable[[Normalizer], Normalizer]:
    """Register a normalizer for `event_types`. `reads`: every path of a `data` item it reads
    (dotted, ingest.terra.projection's syntax); a big delivery of these types is then parsed as a
    stream that keeps only those (a path left out reads as absent: list them all).
    `in_transaction=False`: it runs outside the row's transaction (it waits on the network), and
    writes what it stores through statements of their own."""

    def decorator(fn: Normalizer) -> Normalizer:
        for event_type in event_types:
            _normalizers[event_type] = fn
            if reads is None:
                _item_reads.pop(event_type, None)
            else:
                _item_reads[event_type] = tuple(reads)
            if in_transaction:
                _outside_transaction.discard(event_type)
            else:
                _outside_transaction.add(event_type)
        return fn

    return decorator


def runs_in_transaction(event_type: str) -> bool:
    return event_type not in _outside_transaction


def normalizer_for(event_type: str) -> Normalizer | None:
    return _normalizers.get(event_type)


def item_reads_for(event_type: str) -> tuple[str, ...] | None:
    """The data-item paths the type's normalizer reads, or None when it did not say."""
    return _item_reads.get(event_type)


def registered_types() -> list[str]:
    return sorted(_normalizers)


@dataclass(frozen=True)
class UserTable:
    """A table of per-user data that the sync API serves and the user wipe deletes.

    `model` has a `user` foreign key and an indexed `updated_at`. Registration order is the
    wipe order (children before parents). `stored_files(row)` names storage keys to delete after
    the wipe commits (and to copy into the export). ingest registers its typed tables; labs
    registers its own in ready()."""

    key: str
    model: type
    sync: bool = True
    wipe: bool = True
    stored_files: Callable[[object], list[str]] | None = None


_user_tables: dict[str, UserTable] = {}


def register_user_table(table: UserTable) -> None:
    """Also a source of the user's data for the wipe and the export (ops.userdata), unless it
    is not wiped (a view over another table: its rows are that table's)."""
    from ops.userdata import UserData, user_data_register

    _user_tables[table.key] = table
    if table.wipe:
        model = table.model
        user_data_register(
            UserData(
                table.key,
                model,
                lambda subject: model.objects.filter(user=subject.user),
                stored_files=table.stored_files,
            )
        )


def user_tables() -> list[UserTable]:
    return list(_user_tables.values())

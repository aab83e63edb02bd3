"""Keyset (cursor) pagination on the primary key: every page is one index range scan, however
deep, and rows inserted meanwhile never shift a page. Cursors are opaque to clients."""

import base64
import binascii

from ops.errors import ApiError, ErrorCode

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def encode_cursor(pk: int) -> str:
    return base64.urlsafe_b64encode(f"pk:{pk}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, *, param: str = "cursor") -> int | None:
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "pk":
            raise ValueError(raw)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, ErrorCode.INVALID_REQUEST, f"{param} is not a valid cursor.") from None


def keyset_page(queryset, *, cursor: str | None, page_size: int, descending: bool, param: str):
    """(rows, next_cursor, has_next_page) for `queryset` ordered by pk."""
    after = decode_cursor(cursor, param=param)
    if after is not None:
        queryset = queryset.filter(pk__lt=after) if descending else queryset.filter(pk__gt=after)
    queryset = queryset.order_by("-pk" if descending else "pk")
    rows = list(queryset[: page_size + 1])  # one extra row answers has_next_page for free
    has_next = len(rows) > page_size
    rows = rows[:page_size]
    next_cursor = encode_cursor(rows[-1].pk) if has_next else None
    return rows, next_cursor, has_next

"""One way to page an API list: keyset (cursor) pagination, one response shape for every list,
`{"<items>": [...], "cursor": <str or null>, "has_next_page": <bool>}` — pass `cursor` back to
get the next page. Every page is one index range scan however deep, and rows inserted meanwhile
never shift a page. Cursors are opaque to clients.

- `keyset_page`: ordered by the primary key (workflow instances, graph runs, …).
- `keyset_page_by_time`: newest first by a timestamp, ties by id (DLQ rows, traces).
- `KeysetPagination`: the same shape for DRF generic list views (lab uploads, biomarkers).
"""

import base64
import binascii
import json
from datetime import datetime

from django.db.models import Q
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from ops.errors import ApiError, ErrorCode

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def list_body(items_key: str, items: list, cursor: str | None, has_next_page: bool) -> dict:
    return {items_key: items, "cursor": cursor, "has_next_page": has_next_page}


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(cursor: str) -> str:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()


def _invalid(param: str, code: str = ErrorCode.INVALID_CURSOR) -> ApiError:
    return ApiError(400, code, f"{param} is not a valid cursor.")


def encode_cursor(pk: int) -> str:
    return _b64(f"pk:{pk}")


def decode_cursor(cursor: str | None, *, param: str = "cursor") -> int | None:
    if not cursor:
        return None
    try:
        kind, _, value = _unb64(cursor).partition(":")
        if kind != "pk":
            raise ValueError(kind)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        # The workflow API has always answered invalid_request here (docs/workflows/http.md).
        raise _invalid(param, ErrorCode.INVALID_REQUEST) from None


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


def keyset_page_by_time(queryset, *, field: str, cursor: str | None, page_size: int):
    """(rows, next_cursor, has_next_page), newest `field` first, ties by id (the index order of
    (field, id) read backwards)."""
    if cursor:
        try:
            data = json.loads(_unb64(cursor))
            at, pk = datetime.fromisoformat(data["t"]), int(data["i"])
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
            raise _invalid("cursor") from None
        queryset = queryset.filter(Q(**{f"{field}__lt": at}) | Q(**{field: at, "id__lt": pk}))
    rows = list(queryset.order_by(f"-{field}", "-id")[: page_size + 1])
    has_next = len(rows) > page_size
    rows = rows[:page_size]
    next_cursor = None
    if has_next:
        last = rows[-1]
        next_cursor = _b64(json.dumps({"t": getattr(last, field).isoformat(), "i": last.pk}))
    return rows, next_cursor, has_next


class KeysetPagination(CursorPagination):
    """DRF's cursor pagination answering the project's list shape; subclasses name the items
    key (`items_key`) and the `ordering`."""

    items_key = "results"

    def get_paginated_response(self, data):
        cursor = None
        link = self.get_next_link()
        if link:
            from urllib.parse import parse_qs, urlsplit

            cursor = parse_qs(urlsplit(link).query).get(self.cursor_query_param, [None])[0]
        return Response(list_body(self.items_key, data, cursor, self.has_next))

    def get_paginated_response_schema(self, schema):
        return {
            "type": "object",
            "required": [self.items_key, "cursor", "has_next_page"],
            "properties": {
                self.items_key: schema,
                "cursor": {"type": "string", "nullable": True},
                "has_next_page": {"type": "boolean"},
            },
        }

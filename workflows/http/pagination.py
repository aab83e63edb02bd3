"""Keyset (cursor) pagination for the workflow API: the project's one helper (ops.pagination)."""

from ops.pagination import (  # noqa: F401  (re-exported for the workflow and graph views)
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    decode_cursor,
    encode_cursor,
    keyset_page,
)

"""Built-in normalizers, registered by event type on import (see ingest.registry). `body` and
`lab_report` are registered by labs; until then their rows park with `no_normalizer`."""

from ingest.normalizers import activity, connections, daily, skipped, sleep  # noqa: F401

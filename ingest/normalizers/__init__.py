"""Built-in normalizers, registered by event type on import (see ingest.registry). `body` and
`lab_report` are registered by labs; until then their rows park with `no_normalizer`."""

from ingest.normalizers import (  # noqa: F401
    activity,
    connections,
    daily,
    s3_payload,
    skipped,
    sleep,
)

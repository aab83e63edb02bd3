"""Built-in normalizers, registered by event type on import (see ingest.registry)."""

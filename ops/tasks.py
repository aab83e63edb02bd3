"""ops' scheduled task: the daily clean-up of expired idempotency keys."""

import logging

from django.utils import timezone

from ops.models import IdempotencyKey

log = logging.getLogger(__name__)


def cleanup() -> dict:
    """Daily: delete idempotency keys past their expiry."""
    keys, _ = IdempotencyKey.objects.filter(expires_at__lt=timezone.now()).delete()
    log.info("ops cleanup: %s idempotency keys", keys)
    return {"idempotency_keys": keys}

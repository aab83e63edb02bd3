"""Who a delivery belongs to: Terra's reference_id is our username, else the active connection
for its Terra user id. Also releases rows that waited for a connection once one exists."""

from django.contrib.auth import get_user_model

from ingest.models import RawEvent, TerraConnection


def user_for_event(raw_event: RawEvent):
    """The user a data delivery belongs to, or None (the caller parks the row with
    `no_connection_for_terra_user`)."""
    User = get_user_model()
    if raw_event.reference_id:
        user = User.objects.filter(username=raw_event.reference_id).first()
        if user is not None:
            return user
    if raw_event.terra_user_id:
        connection = (
            TerraConnection.objects.filter(
                terra_user_id=raw_event.terra_user_id, deactivated_at__isnull=True
            )
            .select_related("user")
            .first()
        )
        if connection is not None:
            return connection.user
    return None


def user_for_reference(reference_id: str):
    """The user named by a reference_id, created if new (the auth webhook is how users arrive
    from Terra's widget)."""
    user, _ = get_user_model().objects.get_or_create(username=reference_id[:150])
    return user


def connection_released(*, terra_user_id: str) -> int:
    """A connection for `terra_user_id` was created or re-activated: re-enqueue, at once, the
    rows parked because it was missing (the drain leaves those alone)."""
    from ingest.services import raw_events_requeue_for_terra_user

    return raw_events_requeue_for_terra_user(terra_user_id=terra_user_id)

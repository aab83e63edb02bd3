"""Who a delivery belongs to: Terra's reference_id is our username, else the active connection
for its Terra user id."""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.contrib.auth import get_user_model

from ingest.models import RawEvent, TerraConnection

# Users a consumer batch looked up in one query before normalizing its rows (by username).
# Only users found are kept: a name missing here is looked up again, because an auth row
# earlier in the same batch may just have created that user.
_known_users: ContextVar[dict | None] = ContextVar("known_users", default=None)


@contextmanager
def users_prefetched(usernames: Iterable[str]) -> Iterator[None]:
    """While the block runs, user_for_event finds these users without a query each (one
    query for the whole batch instead of one per row)."""
    wanted = {name for name in usernames if name}
    found = get_user_model().objects.filter(username__in=wanted) if wanted else []
    token = _known_users.set({user.username: user for user in found})
    try:
        yield
    finally:
        _known_users.reset(token)


def _user_named(username: str):
    known = _known_users.get()
    if known is not None and username in known:
        return known[username]
    return get_user_model().objects.filter(username=username).first()


def user_for_event(raw_event: RawEvent):
    """The user a data delivery belongs to, or None (the caller parks the row with
    `no_connection_for_terra_user`)."""
    if raw_event.reference_id:
        user = _user_named(raw_event.reference_id)
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

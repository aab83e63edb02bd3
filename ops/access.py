"""Access audit: the one place that writes audit rows for reads of a user's health data and for
authorization denials. Rows name the actor, the user concerned and the request id, never the
values read. docs/health-data.md › Access audit."""

import hashlib
import logging

from django.db import DatabaseError

from ops import auditstore
from ops.request_id import get_request_id
from ops.services import actor_for, audit_log_write_limited
from ops.throttling import client_ip_or_none

log = logging.getLogger(__name__)

# Reads by one actor of one kind of one user's data within this many seconds of the first share
# one audit row, whose count goes up with each.
READ_WINDOW_SECONDS = 600
DENIED = "auth.denied"


def _subject_id(subject) -> int | None:
    if subject is None:
        return None
    return subject if isinstance(subject, int) else subject.pk


def _open_key(actor: str, action: str, subject_id: int | None, resource: str) -> str:
    # Reads of nobody's data (an unresolved delivery) collapse per resource instead.
    who = f"user:{subject_id}" if subject_id is not None else f"resource:{resource}"
    return hashlib.sha256(f"{actor}\x1f{action}\x1f{who}".encode()).hexdigest()


def audit_read(
    *, thing: str, subjects, request=None, actor: str | None = None, resource: str = ""
) -> None:
    """Record that `request`'s operator (or `actor`, for a command) read `thing` of each user in
    `subjects` (users or user ids; None for data that names no user): one `<thing>.read` row per
    user per READ_WINDOW_SECONDS, counted up by each repeat. Raises when the row cannot be
    written: a read that cannot be audited must not be served."""
    if not isinstance(subjects, list | tuple | set | frozenset):
        subjects = [subjects]
    actor = actor or actor_for(request)
    action = f"{thing}.read"
    rid = get_request_id()
    ip = client_ip_or_none(request) if request is not None else None
    agent = request.META.get("HTTP_USER_AGENT", "")[:300] if request is not None else ""
    entries = {}
    for subject_id in {_subject_id(s) for s in subjects}:
        key = _open_key(actor, action, subject_id, resource)
        entries[key] = {
            "open_key": key,
            "actor": actor[:200],
            "action": action[:100],
            "resource": resource[:300],
            "ip": ip,
            "user_agent": agent,
            "request_id": ("" if rid == "-" else rid)[:128],
            "subject_id": subject_id,
        }
    auditstore.reads_count(entries=list(entries.values()), window=READ_WINDOW_SECONDS)


def audit_denied(request, *, code: str) -> None:
    """An authenticated caller was refused (403): audited, bounded under a flood like rejected
    credentials are. The path is kept (it may name a user: a wipe redacts it), the body never."""
    try:
        audit_log_write_limited(
            action=DENIED,
            request=request,
            actor=actor_for(request),
            resource=f"{request.method} {request.path}",
            result="denied",
            metadata={"code": code},
        )
    except DatabaseError:  # the refusal stands either way; a 403 must not become a 500
        log.warning("could not audit a denial of %s", request.path, exc_info=True)

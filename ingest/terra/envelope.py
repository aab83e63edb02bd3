"""What a verified delivery is about (type, Terra user, reference, provider), read from the raw body
with a lean JSON parse so a 50 MB delivery never becomes 50 MB worth of Python dicts."""

from dataclasses import dataclass, field

from ingest.terra.payload import NOT_AN_OBJECT, Unparseable, json_loads
from ingest.terra.projection import WHOLE, payload_projected

# Only objects that carry one of these keys are kept as dicts while parsing; every other object
# (heart-rate samples, data items…) collapses to one shared marker. The decoder still checks the
# whole document, but memory stays close to the size of the body.
_KEPT_KEYS = frozenset(
    {"type", "user", "new_user", "old_user", "user_id", "provider", "reference_id", "upload_id"}
)
LAB_REPORT = "lab_report"
_LAB_TYPES = frozenset({"lab_report.completed", "lab_report.failed"})


class _Collapsed:
    """A JSON object the webhook does not need to look into."""

    __slots__ = ()


_COLLAPSED = _Collapsed()


def _keep_or_collapse(pairs: list[tuple[str, object]]):
    for key, _ in pairs:
        if key in _KEPT_KEYS:
            return dict(pairs)
    return _COLLAPSED


@dataclass(frozen=True)
class Envelope:
    event_type: str
    terra_user_id: str
    reference_id: str
    provider: str
    # Fields left out because they do not fit their column ({"user_id": "too_long"}): the
    # webhook_received trace carries them. Strings are safe already (payload.safe_text).
    notes: dict = field(default_factory=dict)


# What a body that is not a JSON object is recorded as.
UNPARSEABLE = Envelope("unknown", "", "", "")
# Column widths: names are clipped to theirs; an identifier longer than its column is left out
# (clipping could make two of them one), with the reason in notes.
TYPE_MAX, PROVIDER_MAX, ID_MAX = 64, 64, 255


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _identifier(value, name: str, notes: dict) -> str:
    text = _text(value)
    if len(text) > ID_MAX:
        notes[name] = "too_long"
        return ""
    return text


# A body bigger than this is read as a stream that keeps only the envelope's fields: parsing it
# whole would hold its text beside its bytes (twice its size in the web worker).
STREAM_ABOVE_BYTES = 4 * 1024 * 1024
_ENVELOPE_FIELDS = {
    **{key: WHOLE for key in ("type", "user", "new_user", "old_user", "reference_id", "upload_id")},
    "data": {"upload_id": WHOLE, "reference_id": WHOLE},  # a list reads as []
}


def envelope_read(body: bytes | bytearray) -> Envelope:
    """Parse `body` (already signature-checked) and name the event. Raises Unparseable (with the
    reason) when the body is not a JSON object, under ingest.terra.payload's rules."""
    if len(body) > STREAM_ABOVE_BYTES:
        try:
            return envelope_from_dict(payload_projected(body, _ENVELOPE_FIELDS))
        except ValueError:
            pass  # not one JSON object: the whole parse below names why
    doc = json_loads(body, object_pairs_hook=_keep_or_collapse)
    if isinstance(doc, _Collapsed):
        return Envelope("unknown", "", "", "")
    if not isinstance(doc, dict):
        raise Unparseable(NOT_AN_OBJECT, type(doc).__name__)
    return envelope_from_dict(doc)


def envelope_from_dict(doc: dict) -> Envelope:
    """Same as envelope_read for an already-parsed payload (replays, the simulator)."""
    raw_type = doc.get("type")
    notes: dict = {}
    if _is_lab_report(doc, raw_type):
        return Envelope(
            LAB_REPORT, "", _identifier(_lab_reference(doc), "upload_id", notes), "", notes
        )
    user = doc.get("user") if isinstance(doc.get("user"), dict) else None
    if user is None and isinstance(doc.get("new_user"), dict):
        user = doc["new_user"]  # user_reauth: the row belongs to the id that stays
    user = user or {}
    reference = _text(user.get("reference_id")) or _text(doc.get("reference_id"))
    return Envelope(
        event_type=_text(raw_type)[:TYPE_MAX] or "unknown",
        terra_user_id=_identifier(user.get("user_id"), "user_id", notes),
        reference_id=_identifier(reference, "reference_id", notes),
        provider=_text(user.get("provider"))[:PROVIDER_MAX],
        notes=notes,
    )


def _is_lab_report(doc: dict, raw_type) -> bool:
    if raw_type in _LAB_TYPES:
        return True
    # Terra's oldest lab shape: no type, a string upload_id and a list of data.
    return raw_type is None and isinstance(doc.get("upload_id"), str) and _is_list(doc.get("data"))


def _is_list(value) -> bool:
    return isinstance(value, list)


def _lab_reference(doc: dict) -> str:
    """The upload id: the only correlator between our upload and Terra's answer. A
    lab_report.failed may come without a top-level upload_id; then data.upload_id, then
    data.reference_id (what Terra echoes back from the upload form)."""
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    for value in (doc.get("upload_id"), data.get("upload_id"), data.get("reference_id")):
        if isinstance(value, str) and value:
            return value
    return ""

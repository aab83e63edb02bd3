"""Instance labels: the rules a label set must follow and the `key:value` filter syntax.

Labels are small, operator-facing tags (`user: alice`, `tenant: acme`) set at create time and
filtered on in lists (`?label=user:alice`, repeatable, all must match). The limits keep every
label inside the (key, value, instance) index of WorkflowInstanceLabel.
"""

import re

from workflows.errors import InvalidLabels

LABELS_MAX = 10
KEY_MAX = 32
VALUE_MAX = 64
KEY_PATTERN = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9-_]*$")  # so no ":" (the filter separator)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_labels(raw) -> dict[str, str]:
    """The labels as given, or InvalidLabels (400 invalid_labels) naming the first problem."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidLabels(f"labels must be an object of strings, got {type(raw).__name__}")
    if len(raw) > LABELS_MAX:
        raise InvalidLabels(f"at most {LABELS_MAX} labels, got {len(raw)}")
    for key, value in raw.items():
        check_key(key)
        if not isinstance(value, str) or len(value) > VALUE_MAX or _CONTROL.search(value):
            raise InvalidLabels(
                f"label {key!r}: value must be a string of ≤ {VALUE_MAX} characters without "
                f"control characters, got {value!r}"
            )
    return dict(raw)


def check_key(key) -> str:
    if not isinstance(key, str) or len(key) > KEY_MAX or not KEY_PATTERN.match(key):
        raise InvalidLabels(
            f"label key must match {KEY_PATTERN.pattern} and be ≤ {KEY_MAX} characters, got {key!r}"
        )
    return key


def parse_filters(raw: list[str]) -> list[tuple[str, str]]:
    """["user:alice", "tier:gold"] → [("user", "alice"), ("tier", "gold")]; the value may hold
    ":" (keys cannot)."""
    pairs = []
    for item in raw:
        key, sep, value = item.partition(":")
        if not sep:
            raise InvalidLabels(f"label filter must look like key:value, got {item!r}")
        check_key(key)
        pairs.append((key, value))
    return pairs

"""Defensive readers for Terra payload values: a wrong type reads as None (or {}), never raises."""

from datetime import date


def as_text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def as_number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def as_date(value) -> date | None:
    """'2026-06-29' or '2026-06-29T08:15:00+02:00' → the date written (no time-zone shift)."""
    text = as_text(value)
    if text is None:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None

"""One duration grammar for the engine, the API and settings (ops/durations.py)."""

import contextlib

import pytest
from django.core.exceptions import ImproperlyConfigured
from hypothesis import given
from hypothesis import strategies as st

from ops.durations import UNIT_MS, DurationError, format_ms, parse_ms
from workflows import durations
from workflows.errors import InvalidDuration

SPELLINGS = {
    "ms": ["ms", "millisecond", "milliseconds", "msec"],
    "s": ["s", "sec", "secs", "second", "seconds"],
    "m": ["m", "min", "mins", "minute", "minutes"],
    "h": ["h", "hr", "hrs", "hour", "hours"],
    "d": ["d", "day", "days"],
    "w": ["w", "week", "weeks"],
}


@pytest.mark.parametrize(
    ("text", "ms"),
    [("500ms", 500), ("1 ms", 1), ("1ms", 1), ("2 hours", 7_200_000), ("1.5 minutes", 90_000)],
)
def test_milliseconds_are_milliseconds_not_minutes(text, ms):
    assert parse_ms(text) == ms
    assert durations.to_ms(text) == ms


@pytest.mark.parametrize(
    "text", ["1", "5 months", "1M", "2 years", "1e3s", "soon", "0.5ms", "-1s", "1h30m", "１s", ""]
)
def test_ambiguous_or_malformed_durations_are_clear_errors(text):
    with pytest.raises(DurationError):
        parse_ms(text)
    with pytest.raises(InvalidDuration):
        durations.to_ms(text)


def test_months_are_refused_with_a_reason():
    with pytest.raises(DurationError, match="no fixed length"):
        parse_ms("3 months")


@given(
    number=st.integers(min_value=0, max_value=10_000),
    unit=st.sampled_from(sorted(SPELLINGS)),
    data=st.data(),
)
def test_every_spelling_of_a_unit_means_the_same(number, unit, data):
    spelling = data.draw(st.sampled_from(SPELLINGS[unit]))
    space = data.draw(st.sampled_from(["", " ", "  "]))
    assert parse_ms(f"{number}{space}{spelling}") == number * UNIT_MS[unit]


@given(st.integers(min_value=0, max_value=10**12))
def test_formatting_round_trips(ms):
    assert parse_ms(format_ms(ms)) == ms


@given(st.text(max_size=20))
def test_any_text_parses_or_raises_a_duration_error(text):
    with contextlib.suppress(DurationError):
        assert parse_ms(text) >= 0


def test_the_dlq_filter_speaks_the_same_grammar(operator_api):
    ops = operator_api("ingest:admin")
    assert ops.get("/v1/admin/dlq", {"older_than": "2 hours"}).status_code == 200
    refused = ops.get("/v1/admin/dlq", {"older_than": "5 months"})
    assert refused.status_code == 400
    assert "no fixed length" in refused.json()["message"]


def test_a_duration_setting_refuses_a_bad_value_loudly(monkeypatch):
    from config.settings import env_duration

    monkeypatch.setenv("SOME_TIMEOUT", "90 minutes")
    assert env_duration("SOME_TIMEOUT", None).total_seconds() == 5400
    monkeypatch.setenv("SOME_TIMEOUT", "500")
    with pytest.raises(ImproperlyConfigured, match="SOME_TIMEOUT"):
        env_duration("SOME_TIMEOUT", None)

"""The null-preserving upsert every typed table is written through."""

from datetime import date

import pytest

from ingest.models import DailySummary
from ingest.normalizers.rows import upsert_keep_non_null

pytestmark = pytest.mark.django_db

KEY = {"source": "garmin", "date": date(2026, 7, 1)}


def test_first_write_inserts_the_row(alice):
    upsert_keep_non_null(DailySummary, key={"user_id": alice.pk, **KEY}, values={"steps": 100})
    assert DailySummary.objects.get().steps == 100


def test_null_never_overwrites_a_stored_value(alice):
    key = {"user_id": alice.pk, **KEY}
    upsert_keep_non_null(DailySummary, key=key, values={"steps": 100, "sleep_minutes": None})
    upsert_keep_non_null(DailySummary, key=key, values={"steps": None, "sleep_minutes": 420})
    row = DailySummary.objects.get()
    assert (row.steps, row.sleep_minutes) == (100, 420)


def test_a_new_value_replaces_the_old_one(alice):
    key = {"user_id": alice.pk, **KEY}
    upsert_keep_non_null(DailySummary, key=key, values={"steps": 100})
    upsert_keep_non_null(DailySummary, key=key, values={"steps": 250})
    assert DailySummary.objects.get().steps == 250


def test_keep_existing_columns_only_fill_gaps(alice):
    key = {"user_id": alice.pk, **KEY}
    upsert_keep_non_null(DailySummary, key=key, values={"resting_heart_rate": 50.0})
    upsert_keep_non_null(
        DailySummary,
        key=key,
        values={"resting_heart_rate": 60.0},
        keep_existing={"resting_heart_rate"},
    )
    assert DailySummary.objects.get().resting_heart_rate == 50.0


def test_unchanged_replay_reports_no_change_and_keeps_updated_at(alice):
    key = {"user_id": alice.pk, **KEY}
    assert upsert_keep_non_null(DailySummary, key=key, values={"steps": 100}) is not None
    before = DailySummary.objects.get().updated_at
    assert upsert_keep_non_null(DailySummary, key=key, values={"steps": 100}) is None
    assert DailySummary.objects.get().updated_at == before


def test_rows_are_per_user_and_source(alice, bob):
    upsert_keep_non_null(DailySummary, key={"user_id": alice.pk, **KEY}, values={"steps": 1})
    upsert_keep_non_null(DailySummary, key={"user_id": bob.pk, **KEY}, values={"steps": 2})
    upsert_keep_non_null(
        DailySummary, key={"user_id": bob.pk, **KEY, "source": "oura"}, values={"steps": 3}
    )
    assert DailySummary.objects.count() == 3

"""GET /v1/sync: a year of one user's data, cursor-paginated across tables, incremental by
`since`; bad input answers 400 with a code."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from ingest.models import Activity, DailySummary, SleepSession
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def make_year(user, *, start=None, days=365):
    """≈2000 rows: a daily summary, a sleep session and ~3.5 activities per day."""
    base = start or (timezone.now() - timedelta(days=days))
    daily, sleep, acts = [], [], []
    for d in range(days):
        at = base + timedelta(days=d)
        daily.append(
            DailySummary(user=user, source="garmin", date=at.date(), steps=d, updated_at=at)
        )
        sleep.append(
            SleepSession(user=user, source="oura", record_key=f"s{d}", start_time=at, updated_at=at)
        )
        for k in range(3 if d % 2 else 4):
            acts.append(
                Activity(
                    user=user,
                    source="garmin",
                    record_key=f"a{d}-{k}",
                    start_time=at + timedelta(hours=k + 1),
                    activity_type=k,
                    updated_at=at,  # several rows share one updated_at: the id breaks ties
                )
            )
    DailySummary.objects.bulk_create(daily)
    SleepSession.objects.bulk_create(sleep)
    Activity.objects.bulk_create(acts)
    return len(daily) + len(sleep) + len(acts)


def pull(client, **params):
    pages, seen = [], {}
    while True:
        response = client.get("/v1/sync", params)
        assert response.status_code == 200, response.json()
        body = response.json()
        pages.append(body)
        for table, rows in body["tables"].items():
            for row in rows:
                key = (table, row["id"])
                assert key not in seen, f"row {key} served twice"
                seen[key] = row
        if not body["next"]:
            return pages, seen
        params = {k: v for k, v in params.items() if k == "limit"} | {"cursor": body["next"]}


def test_a_year_is_served_once_each_across_pages(user_api, alice, bob):
    total = make_year(alice)
    make_year(bob, days=20)  # someone else's rows never leak
    assert 1900 < total < 2200
    pages, seen = pull(user_api, limit=300)
    assert len(seen) == total
    assert len(pages) == -(-total // 300)
    assert all(p["count"] <= 300 for p in pages)
    assert {p["server_time"] for p in pages} == {pages[0]["server_time"]}
    assert all("user_id" not in row and "raw" not in row for row in seen.values())
    # each table's rows come in (updated_at, id) order within the pull
    ordered = [
        (t, r["updated_at"], r["id"])
        for p in pages
        for t, rows in p["tables"].items()
        for r in rows
    ]
    for table in ("activities", "daily_summary", "sleep_sessions"):
        mine = [(u, i) for t, u, i in ordered if t == table]
        assert mine == sorted(
            mine, key=lambda x: (datetime.fromisoformat(x[0].replace("Z", "+00:00")), x[1])
        )


def test_since_returns_only_what_changed_and_server_time_feeds_the_next_pull(user_api, alice):
    make_year(alice, days=30)
    _, first = pull(user_api)
    server_time = user_api.get("/v1/sync", {"limit": 1}).json()["server_time"]
    assert len(first) == 30 + 30 + 105
    _, nothing = pull(user_api, since=server_time)
    assert nothing == {}
    row = DailySummary.objects.filter(user=alice).order_by("date").first()
    DailySummary.objects.filter(pk=row.pk).update(steps=999, updated_at=timezone.now())
    _, changed = pull(user_api, since=server_time)
    assert list(changed) == [("daily_summary", row.pk)]
    assert changed[("daily_summary", row.pk)]["steps"] == 999


def test_a_page_full_at_a_table_boundary_points_at_the_next_table(user_api, alice):
    make_year(alice, days=2)  # 2 activities days → 7 activities, 2 daily, 2 sleep
    body = user_api.get("/v1/sync", {"limit": 7}).json()
    assert list(body["tables"]) == ["activities"] and body["count"] == 7
    assert body["next"]
    body = user_api.get("/v1/sync", {"cursor": body["next"], "limit": 4}).json()
    assert body["count"] == 4 and body["next"] is None


def test_an_empty_store_answers_an_empty_page(user_api):
    body = user_api.get("/v1/sync").json()
    assert body["count"] == 0 and body["tables"] == {} and body["next"] is None
    assert body["server_time"]


@pytest.mark.parametrize("since", ["yesterday", "2026-13-01", "2026-01-01T25:00:00", "1"])
def test_a_bad_since_is_400_invalid_since(user_api, since):
    response = user_api.get("/v1/sync", {"since": since})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_since"


def test_since_accepts_a_date_and_an_offset(user_api, alice):
    make_year(alice, start=timezone.now() - timedelta(days=3), days=3)
    assert user_api.get("/v1/sync", {"since": "2000-01-01"}).json()["count"] > 0
    assert user_api.get("/v1/sync", {"since": "2999-01-01T00:00:00+02:00"}).json()["count"] == 0


@pytest.mark.parametrize("cursor", ["garbage", "eyJ0Ijoibm9wZSJ9", "W10="])
def test_a_bad_cursor_is_400_invalid_cursor(user_api, cursor):
    response = user_api.get("/v1/sync", {"cursor": cursor})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"


@pytest.mark.parametrize("limit", ["0", "5000", "ten", "-1"])
def test_a_bad_limit_is_400(user_api, limit):
    response = user_api.get("/v1/sync", {"limit": limit})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_limit"


def test_sync_needs_a_user_token(api, operator_api):
    assert api.get("/v1/sync").status_code == 401
    assert operator_api("ingest:admin").get("/v1/sync").status_code == 403


def test_a_cursor_cannot_read_another_users_rows(user_api, alice):
    other = UserFactory(username="eve")
    make_year(other, days=5)
    make_year(alice, days=5)
    _, seen = pull(user_api, limit=3)
    assert len(seen) == 5 + 5 + 18


def test_since_survives_an_unescaped_plus_and_a_space_separator(user_api, alice):
    make_year(alice, start=timezone.now() - timedelta(days=3), days=3)
    # "+02:00" sent raw in a query string arrives as " 02:00"
    spaced = user_api.get("/v1/sync?since=2000-01-01T00:00:00 02:00")
    assert spaced.status_code == 200 and spaced.json()["count"] > 0
    assert user_api.get("/v1/sync", {"since": "2000-01-01 10:00"}).json()["count"] > 0


def test_sync_rows_carry_iso_timestamps_and_no_raw_payload(user_api, alice):
    SleepSession.objects.create(
        user=alice, source="oura", start_time="2026-03-01T22:00:00Z", raw={"secret": 1}
    )
    row = user_api.get("/v1/sync").json()["tables"]["sleep_sessions"][0]
    assert row["start_time"] == "2026-03-01T22:00:00+00:00"
    assert "raw" not in row and "user_id" not in row


def test_the_database_json_path_and_the_python_path_serve_the_same_rows(
    user_api, alice, monkeypatch
):
    from ingest import sync

    make_year(alice, days=3)
    SleepSession.objects.filter(user=alice).update(
        sleep_minutes=421.5,
        is_nap=False,
        end_time=datetime(2026, 3, 1, 7, 0, 0, 382650, tzinfo=UTC),
        updated_at=datetime(2026, 3, 1, 7, 0, 0, 500000, tzinfo=UTC),
    )
    fast = user_api.get("/v1/sync").json()["tables"]
    monkeypatch.setattr(sync, "_json_keys_are_attnames", lambda model: False)
    plain = user_api.get("/v1/sync").json()["tables"]
    assert fast == plain
    assert fast["sleep_sessions"][0]["end_time"] == "2026-03-01T07:00:00.38265+00:00"

"""The demo feed as `make run` drives it: every minute of an hour brings rows a user can see,
today's daily summary grows through the day, and the demo user's midnight brings a new day."""

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.utils import timezone

from demo import feed, payloads
from ingest.models import DailySummary, RawEvent, SleepSession
from tests.demo.test_simulator import in_process_http, sent  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db
URL = "http://testserver/webhook/terra"


@pytest.fixture
def webhook(in_process_http, sync_queue, django_capture_on_commit_callbacks):  # noqa: F811
    """post(deliveries) → outcome counts: the feed's own posting, answered by this process's
    webhook, with the consumer run before it returns."""
    client = httpx.Client(transport=httpx.WSGITransport(app=WSGIHandler()))

    def post(deliveries: list[dict]) -> dict[str, int]:
        with django_capture_on_commit_callbacks(execute=True):
            return feed.post(client, URL, deliveries)

    yield post
    client.close()


def daily_rows() -> dict:
    return {
        row["date"]: (row["steps"], row["total_burned_calories"], row["sleep_minutes"])
        for row in DailySummary.objects.filter(user__username="demo").values()
    }


def test_every_minute_of_an_hour_brings_new_or_changed_rows(webhook, sent):  # noqa: F811
    # Seen: the auth's 90-day backfill already held every day the feed walked back to, so each
    # minute's deliveries were duplicates (212 in one run) and the console never moved.
    start = timezone.now()
    assert webhook(feed.backlog(username="demo", days=14, now=start)) == {"accepted": 57}
    backfill = list(sent)  # what the auth asked the simulator for, delivered as Terra would
    sent.clear()
    assert webhook(backfill)["accepted"] > 300
    previous, quiet_minutes = start, []
    for minute in range(1, 61):
        now = start + timedelta(minutes=minute)
        events, rows = RawEvent.objects.count(), daily_rows()
        counts = webhook(feed.minute(username="demo", now=now, previous=previous))
        changed = {day for day, values in daily_rows().items() if rows.get(day) != values}
        if set(counts) != {"accepted"} or RawEvent.objects.count() == events or not changed:
            quiet_minutes.append((minute, counts, sorted(changed)))
        previous = now
    assert quiet_minutes == []


def test_todays_steps_grow_minute_by_minute_and_end_at_the_full_day(webhook):
    day = datetime(2026, 7, 1, tzinfo=UTC).date()
    morning = datetime(2026, 7, 1, 8, 0, tzinfo=payloads.DEMO_TZ)
    webhook(feed.backlog(username="demo", days=1, now=morning))
    steps = [DailySummary.objects.get(date=day).steps]
    for minute in range(1, 4):
        now = morning + timedelta(minutes=minute)
        webhook(feed.minute(username="demo", now=now, previous=now - timedelta(minutes=1)))
        steps.append(DailySummary.objects.get(date=day).steps)
    assert steps == sorted(set(steps))  # strictly upward
    full = payloads.daily_payload("demo", day)["data"][0]["distance_data"]["steps"]
    assert steps[-1] < full / 2  # a morning's worth

    midnight = datetime(2026, 7, 2, 0, 0, 30, tzinfo=payloads.DEMO_TZ)
    counts = webhook(feed.minute(username="demo", now=midnight, previous=morning))
    assert counts == {"accepted": 5}  # the finished day, the new day's sleep/activity/body/daily
    assert DailySummary.objects.get(date=day).steps == full
    assert DailySummary.objects.filter(date=day + timedelta(days=1)).exists()
    assert SleepSession.objects.filter(user__username="demo").count() == 2


def test_the_minute_after_a_days_last_minute_sends_no_duplicate_of_its_final_totals(webhook):
    # Seen in CI's clock: the post at 23:59 already carried the day's full totals, so the
    # midnight post's "finished day" was a byte-identical duplicate.
    day = datetime(2026, 7, 1, tzinfo=UTC).date()
    last_minute = datetime(2026, 7, 1, 23, 59, 30, tzinfo=payloads.DEMO_TZ)
    webhook(feed.backlog(username="demo", days=1, now=last_minute - timedelta(minutes=1)))
    webhook(
        feed.minute(username="demo", now=last_minute, previous=last_minute - timedelta(minutes=1))
    )
    full = payloads.daily_payload("demo", day)["data"][0]["distance_data"]["steps"]
    assert DailySummary.objects.get(date=day).steps == full
    counts = webhook(
        feed.minute(username="demo", now=last_minute + timedelta(minutes=1), previous=last_minute)
    )
    assert counts == {"accepted": 4}  # the new day's sleep, activity, body and daily

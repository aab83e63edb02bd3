"""The demo feed (`make run`): what it posts at start and every minute after, signed as Terra
signs and stamped with the moment of posting as Terra's ordering time.

At start: an auth and a backlog of days. Every minute after: today's daily summary revised to
the totals so far (steps, distance, calories and active time grow minute by minute), so each
minute brings a delivery with new bytes and a later ordering time, and today's row changes. At
the demo user's midnight the finished day's final daily and the new day's sleep, activity and
body arrive with it. (Older days would not do: the auth's 90-day backfill already holds them.)
"""

from datetime import datetime, timedelta

import httpx

from demo import payloads
from demo.simulator import webhook_post

NEW_DAY_TYPES = ("sleep", "activity", "body")


def backlog(*, username: str, days: int, now: datetime) -> list[dict]:
    """An auth, then `days` days of daily, sleep, activity and body ending on the demo user's
    today, whose daily holds the totals as of `now`."""
    today = payloads.local_day(now)
    deliveries = [payloads.auth_payload(username)]
    for offset in range(days - 1, -1, -1):
        day = today - timedelta(days=offset)
        deliveries += [
            payloads.data_payload(kind, username, day, as_of=now) for kind in payloads.DATA_TYPES
        ]
    return deliveries


def minute(*, username: str, now: datetime, previous: datetime) -> list[dict]:
    """What the feed posts at `now`, having last posted at `previous`."""
    today = payloads.local_day(now)
    deliveries = []
    if payloads.local_day(previous) != today:
        finished = payloads.local_day(previous)
        # The finished day's final totals, unless the last post (in its last minute) sent them.
        if payloads.day_fraction(finished, previous) < 1:
            deliveries.append(payloads.daily_payload(username, finished))
        deliveries += [payloads.data_payload(kind, username, today) for kind in NEW_DAY_TYPES]
    deliveries.append(payloads.daily_payload(username, today, as_of=now))
    return deliveries


def post(client: httpx.Client, url: str, deliveries: list[dict]) -> dict[str, int]:
    """POST each delivery to the webhook at `url`; how many ended each way (`accepted`,
    `duplicate`, `http_<status>`, `unreachable`: the rest is not tried)."""
    counts: dict[str, int] = {}
    for index, delivery in enumerate(deliveries):
        try:
            outcome = response_outcome(webhook_post(client, url, delivery))
        except httpx.HTTPError:
            counts["unreachable"] = len(deliveries) - index
            break
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def response_outcome(response: httpx.Response) -> str:
    """How the webhook took one delivery: accepted, duplicate or http_<status>."""
    if response.status_code != 200:
        return f"http_{response.status_code}"
    try:
        return "duplicate" if response.json().get("duplicate") else "accepted"
    except ValueError:
        return "accepted"

"""Realistic Terra deliveries for demo mode and benchmarks, shaped like Terra's published
webhook examples (auth, daily, sleep, activity, body, lab_report.completed) with plausible
values. Values are seeded by (user, date, type), so posting the same day twice sends the same
bytes and the webhook dedupes it, as it would a real Terra redelivery. A daily built `as_of` a
moment inside its day holds that day's totals so far (to the minute), as a wearable syncing
through the day would send them."""

import hashlib
import random
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone

VERSION = "2022-03-16"
DEFAULT_PROVIDER = "GARMIN"
DEFAULT_SCOPES = "ACTIVITY_EXPORT,HEALTH_EXPORT,BODY_EXPORT,SLEEP_EXPORT"
# Demo users live one hour east of UTC so the "date written, not UTC date" rule is exercised.
DEMO_TZ = timezone(timedelta(hours=1))
DATA_TYPES = ("daily", "sleep", "activity", "body")
MINUTES_PER_DAY = 24 * 60


def terra_user_id_for(username: str, provider: str = DEFAULT_PROVIDER) -> str:
    """A stable fake Terra user id per (username, provider)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"vitalflow-demo:{provider}:{username}"))


def _rng(*parts) -> random.Random:
    seed = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def _stamp(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=DEMO_TZ)


def local_day(moment: datetime) -> date:
    """The demo user's date at `moment`."""
    return moment.astimezone(DEMO_TZ).date()


def day_fraction(day: date, as_of: datetime | None) -> float:
    """How much of `day` has passed at `as_of`, in whole minutes (at least one): 1 for a day
    already over, or when no `as_of` is given."""
    if as_of is None:
        return 1.0
    minutes = int((as_of - _midnight(day)).total_seconds() // 60) + 1
    return min(max(minutes, 1), MINUTES_PER_DAY) / MINUTES_PER_DAY


def terra_user(
    username: str, *, provider: str = DEFAULT_PROVIDER, terra_user_id: str | None = None
) -> dict:
    return {
        "user_id": terra_user_id or terra_user_id_for(username, provider),
        "provider": provider,
        "last_webhook_update": None,
        "scopes": DEFAULT_SCOPES,
        "reference_id": username,
        "active": True,
    }


def auth_payload(username: str, **user_kwargs) -> dict:
    return {
        "type": "auth",
        "status": "success",
        "message": "User has successfully authenticated",
        "widget_session_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"widget:{username}")),
        "user": terra_user(username, **user_kwargs),
    }


def daily_payload(
    username: str, day: date, *, as_of: datetime | None = None, **user_kwargs
) -> dict:
    """The day's summary; with `as_of` inside the day, its totals so far (steps, distance,
    calories, active time grow minute by minute; averages and scores stay)."""
    rng = _rng(username, day, "daily")
    share = day_fraction(day, as_of)
    # At least 3500 steps a day: 2.4 a minute, so the steps so far grow every minute.
    steps = round(rng.randint(3500, 16000) * share)
    low, moderate, vigorous = (
        round(seconds * share)
        for seconds in (rng.randint(1800, 7200), rng.randint(300, 3600), rng.randint(0, 1500))
    )
    return {
        "type": "daily",
        "version": VERSION,
        "user": terra_user(username, **user_kwargs),
        "data": [
            {
                "metadata": {
                    "start_time": _stamp(_midnight(day)),
                    "end_time": _stamp(_midnight(day + timedelta(days=1))),
                    "upload_type": 0,
                },
                "distance_data": {"steps": steps, "distance_meters": round(steps * 0.78, 1)},
                "calories_data": {
                    "total_burned_calories": round(rng.uniform(1900, 3200) * share, 1)
                },
                "active_durations_data": {
                    "activity_seconds": low + moderate + vigorous,
                    "low_intensity_seconds": low,
                    "moderate_intensity_seconds": moderate,
                    "vigorous_intensity_seconds": vigorous,
                },
                "heart_rate_data": {
                    "summary": {
                        "resting_hr_bpm": rng.randint(48, 66),
                        "avg_hrv_rmssd": round(rng.uniform(35, 95), 1),
                        "avg_hr_bpm": rng.randint(65, 85),
                    }
                },
                "stress_data": {"avg_stress_level": rng.randint(15, 55)},
                "strain_data": {"strain_level": round(rng.uniform(6, 18), 1)},
                "scores": {"recovery": rng.randint(35, 98), "sleep": rng.randint(55, 95)},
            }
        ],
    }


def sleep_payload(username: str, day: date, **user_kwargs) -> dict:
    """The night that ends on `day` (the wake date)."""
    rng = _rng(username, day, "sleep")
    bed = _midnight(day) - timedelta(minutes=rng.randint(0, 110))
    deep, rem, light = rng.randint(3600, 7200), rng.randint(4200, 7800), rng.randint(10800, 16200)
    awake = rng.randint(600, 2700)
    asleep = deep + rem + light
    wake = bed + timedelta(seconds=asleep + awake)
    return {
        "type": "sleep",
        "version": VERSION,
        "user": terra_user(username, **user_kwargs),
        "data": [
            {
                "metadata": {
                    "start_time": _stamp(bed),
                    "end_time": _stamp(wake),
                    "is_nap": False,
                    "upload_type": 1,
                },
                "sleep_durations_data": {
                    "asleep": {
                        "duration_asleep_state_seconds": asleep,
                        "duration_deep_sleep_state_seconds": deep,
                        "duration_REM_sleep_state_seconds": rem,
                        "duration_light_sleep_state_seconds": light,
                    },
                    "awake": {"duration_awake_state_seconds": awake},
                    "sleep_efficiency": round(asleep / (asleep + awake) * 100, 1),
                },
                "heart_rate_data": {
                    "summary": {
                        "resting_hr_bpm": rng.randint(46, 62),
                        "avg_hrv_rmssd": round(rng.uniform(40, 110), 1),
                    }
                },
                "respiration_data": {
                    "oxygen_saturation_data": {
                        "avg_saturation_percentage": round(rng.uniform(94, 99), 1)
                    },
                    "breaths_data": {"avg_breaths_per_min": round(rng.uniform(12, 17), 1)},
                },
                "temperature_data": {"delta": round(rng.uniform(-0.6, 0.6), 2)},
                "readiness_data": {"readiness": rng.randint(40, 97)},
                "scores": {"sleep": rng.randint(55, 95)},
            }
        ],
    }


_ACTIVITIES = ((8, "Morning Run"), (1, "Cycling"), (0, "Indoor Workout"), (7, "Walk"))


def activity_payload(username: str, day: date, **user_kwargs) -> dict:
    rng = _rng(username, day, "activity")
    code, name = rng.choice(_ACTIVITIES)
    start = _midnight(day) + timedelta(hours=rng.randint(6, 19), minutes=rng.randint(0, 59))
    seconds = rng.randint(1200, 5400)
    return {
        "type": "activity",
        "version": VERSION,
        "user": terra_user(username, **user_kwargs),
        "data": [
            {
                "metadata": {
                    "name": name,
                    "summary_id": str(uuid.UUID(int=rng.getrandbits(128))),
                    "start_time": _stamp(start),
                    "end_time": _stamp(start + timedelta(seconds=seconds)),
                    "type": code,
                    "upload_type": 1,
                },
                "distance_data": {
                    "summary": {
                        "distance_meters": round(seconds * rng.uniform(1.2, 3.2), 1),
                        "steps": rng.randint(1000, 9000),
                    }
                },
                "calories_data": {
                    "total_burned_calories": round(seconds / 60 * rng.uniform(7, 12), 1)
                },
                "heart_rate_data": {
                    "summary": {"avg_hr_bpm": rng.randint(105, 160), "max_hr_bpm": 180}
                },
                "active_durations_data": {"activity_seconds": seconds},
            }
        ],
    }


def body_payload(username: str, day: date, **user_kwargs) -> dict:
    rng = _rng(username, day, "body")
    morning = _midnight(day) + timedelta(hours=7, minutes=rng.randint(0, 50))
    return {
        "type": "body",
        "version": VERSION,
        "user": terra_user(username, **user_kwargs),
        "data": [
            {
                "metadata": {
                    "start_time": _stamp(_midnight(day)),
                    "end_time": _stamp(_midnight(day + timedelta(days=1))),
                },
                "measurements_data": {
                    "measurements": [
                        {
                            "measurement_time": _stamp(morning),
                            "weight_kg": round(rng.uniform(68, 76), 1),
                            "bodyfat_percentage": round(rng.uniform(15, 21), 1),
                            "BMI": round(rng.uniform(21.5, 23.5), 1),
                        }
                    ]
                },
                "blood_pressure_data": {
                    "blood_pressure_samples": [
                        {
                            "timestamp": _stamp(morning + timedelta(minutes=5 * i)),
                            "systolic_bp": rng.randint(110, 132),
                            "diastolic_bp": rng.randint(68, 84),
                        }
                        for i in range(2)
                    ]
                },
                "heart_data": {
                    "heart_rate_data": {"summary": {"resting_hr_bpm": rng.randint(48, 64)}}
                },
            }
        ],
    }


BUILDERS = {
    "daily": daily_payload,
    "sleep": sleep_payload,
    "activity": activity_payload,
    "body": body_payload,
}


def data_payload(
    data_type: str, username: str, day: date, *, as_of: datetime | None = None, **user_kwargs
) -> dict:
    """One delivery of `data_type` for `day`; `as_of` revises a daily to the totals so far."""
    if data_type == "daily":
        user_kwargs["as_of"] = as_of
    return BUILDERS[data_type](username, day, **user_kwargs)


def lab_report_payload(*, upload_id: str, reference_id: str, report_date: date) -> dict:
    """A lab_report.completed in Terra's current envelope (layered results)."""
    rng = _rng(upload_id, "lab")
    markers = (
        ("hemoglobin", "Hemoglobin", "718-7", rng.uniform(12.5, 16.5), "g/dL"),
        ("glucose", "Glucose", "2345-7", rng.uniform(75, 105), "mg/dL"),
        ("ldl_cholesterol", "LDL Cholesterol", "13457-7", rng.uniform(70, 160), "mg/dL"),
        ("thyroid_stimulating_hormone", "TSH", "11580-8", rng.uniform(0.5, 4.5), "mIU/L"),
    )
    return {
        "type": "lab_report.completed",
        "event_id": f"evt_{uuid.UUID(int=rng.getrandbits(128)).hex}",
        "occurred_at": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "upload_id": upload_id,
        "data": {
            "session_id": str(rng.getrandbits(60)),
            "reference_id": reference_id,
            "report_date": report_date.isoformat(),
            "report_locale": "en-GB",
            "results_count": len(markers),
            "results": [
                {
                    "source": {
                        "name": display,
                        "value": f"{value:.2f}",
                        "units": unit,
                        "collection_date": report_date.isoformat(),
                    },
                    "biomarker": {"key": key, "display_name": display, "loinc_code": loinc},
                    "measurement": {
                        "type": "numeric",
                        "numeric": round(value, 2),
                        "units": unit,
                        "ucum_code": unit,
                    },
                    "interpretation": {"flag": "normal", "source": "report"},
                }
                for key, display, loinc, value, unit in markers
            ],
            "panels": [],
        },
    }

"""Record identity per Terra's spec and newest-wins ordering.

Activities and sleep sessions are identified by (user, source, record_key): metadata.summary_id,
or "start:<UTC ISO start>" without one. Rows the old (user, source, start_time) identity had split
into several for one summary_id are folded into the most recently updated one. daily_summary
loses vitals_from_sleep: each feeder's value of a shared column now lives in `feeds`."""

import re
from datetime import UTC, date

from django.conf import settings
from django.db import migrations, models

_WRITTEN_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)
SHARED = ("resting_heart_rate", "heart_rate_variability", "sleep_score", "recovery_score")


def _summary_id(raw):
    metadata = raw.get("metadata") if isinstance(raw, dict) else None
    value = metadata.get("summary_id") if isinstance(metadata, dict) else None
    return value[:255] if isinstance(value, str) and value else None


def _written_date(raw, fallback):
    metadata = raw.get("metadata") if isinstance(raw, dict) else None
    text = metadata.get("end_time") if isinstance(metadata, dict) else None
    match = _WRITTEN_DATE.match(text) if isinstance(text, str) else None
    if match:
        try:
            return date(*(int(part) for part in match.groups()))
        except ValueError:
            pass
    return fallback.astimezone(UTC).date() if fallback else None


def _fill_record_keys(model, sleep: bool):
    seen = {}
    for row in model.objects.order_by("-updated_at", "-id").iterator():
        key = _summary_id(row.raw) or f"start:{row.start_time.astimezone(UTC).isoformat()}"
        ident = (row.user_id, row.source, key)
        if ident in seen:
            row.delete()  # an older copy of the same record
            continue
        seen[ident] = row.pk
        row.record_key = key
        fields = ["record_key"]
        if sleep:
            row.wake_date = _written_date(row.raw, row.end_time)
            fields.append("wake_date")
        row.save(update_fields=fields)


def forwards(apps, schema_editor):
    _fill_record_keys(apps.get_model("ingest", "Activity"), sleep=False)
    _fill_record_keys(apps.get_model("ingest", "SleepSession"), sleep=True)
    DailySummary = apps.get_model("ingest", "DailySummary")
    for row in DailySummary.objects.iterator():
        vitals = "sleep" if row.vitals_from_sleep else "daily"
        feeds = {"daily": {}, "sleep": {}}
        for name in SHARED:
            value = getattr(row, name)
            if value is not None:
                feeder = vitals if name in SHARED[:2] else "daily"
                feeds[feeder][name] = value
        row.feeds = feeds
        row.save(update_fields=["feeds"])


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0004_raw_events_body"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="activity", name="activities_unique"),
        migrations.RemoveConstraint(model_name="sleepsession", name="sleep_sessions_unique"),
        migrations.AddField(
            model_name="activity",
            name="ordered_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="activity",
            name="record_key",
            field=models.CharField(default="", max_length=255),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="dailysummary",
            name="daily_ordered_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="dailysummary",
            name="feeds",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="dailysummary",
            name="sleep_record_key",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="sleepsession",
            name="ordered_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="sleepsession",
            name="record_key",
            field=models.CharField(default="", max_length=255),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="sleepsession",
            name="wake_date",
            field=models.DateField(blank=True, null=True),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True),
        migrations.RemoveField(model_name="dailysummary", name="vitals_from_sleep"),
        migrations.AddIndex(
            model_name="sleepsession",
            index=models.Index(fields=["user", "source", "wake_date"], name="sleep_sessions_wake"),
        ),
        migrations.AddConstraint(
            model_name="activity",
            constraint=models.UniqueConstraint(
                fields=("user", "source", "record_key"), name="activities_record"
            ),
        ),
        migrations.AddConstraint(
            model_name="sleepsession",
            constraint=models.UniqueConstraint(
                fields=("user", "source", "record_key"), name="sleep_sessions_record"
            ),
        ),
    ]

"""LOG_FORMAT=json: one JSON object per log line, with the request id and what the line is
about (raw_event_id, workflow ids) wherever the code knows it."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest import registry
from ingest.consumer import raw_event_consume
from ops.request_id import RequestIdLogFilter
from tests.factories import RawEventFactory

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging
from ops.request_id import log_context, set_request_id
set_request_id("rq-42")
log = logging.getLogger("vitalflow.test")
with log_context(raw_event_id=7):
    log.info("normalized\\nacross lines")
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("it broke")
log.warning("outside")
"""


def test_json_log_format_writes_one_object_per_line_with_ids():
    # Seen: LOG_FORMAT did not exist; lines were plain text only.
    env = {**os.environ, "LOG_FORMAT": "json", "DJANGO_SETTINGS_MODULE": "config.settings"}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert [line["message"] for line in lines] == [
        "normalized\nacross lines",
        "it broke",
        "outside",
    ]
    assert all(line["request_id"] == "rq-42" for line in lines)
    assert [line.get("raw_event_id") for line in lines] == [7, 7, None]
    assert "ZeroDivisionError" in lines[1]["exc_info"]
    assert {"time", "level", "logger"} <= set(lines[0])


def test_an_unknown_log_format_is_refused():
    env = {**os.environ, "LOG_FORMAT": "xml"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0 and "LOG_FORMAT must be plain or json" in result.stderr


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.addFilter(RequestIdLogFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def records():
    handler = Records()
    logging.getLogger().addHandler(handler)
    yield handler.records
    logging.getLogger().removeHandler(handler)


@pytest.mark.django_db
def test_consumer_log_lines_name_the_raw_event_and_its_request(monkeypatch, records):
    def explode(raw_event):
        logging.getLogger("ingest.normalizers.test").warning("about to fail")
        raise RuntimeError("normalizer bug")

    monkeypatch.setitem(registry._normalizers, "exploding", explode)
    row = RawEventFactory(event_type="exploding", payload={"type": "exploding"}, request_id="rq-7")
    raw_event_consume(row.pk)
    mine = [r for r in records if getattr(r, "raw_event_id", None) == row.pk]
    assert {r.getMessage() for r in mine} >= {
        "about to fail",
        f"raw event {row.pk}: normalizer for exploding raised",
    }
    assert {r.request_id for r in mine} == {"rq-7"}

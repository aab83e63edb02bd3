"""The outbound pacer: calls to one key are spaced 1 / per_second apart across callers, a caller
that would wait longer than it allows takes nothing and is told when to retry, and several real
processes hammering one key together stay within its rate (PostgreSQL and a SQLite file)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ops.pacing import PaceExceeded, acquire
from tests.ops.live_server import database_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_the_first_call_to_a_key_waits_nothing_and_the_next_waits_for_its_slot():
    assert acquire("clinic", per_second=0.5, max_wait=5) == 0
    assert 1.0 < acquire("clinic", per_second=0.5, max_wait=5) <= 2.0
    assert acquire("another-host", per_second=0.5, max_wait=5) == 0  # keys are independent


@pytest.mark.django_db
def test_a_caller_that_would_wait_too_long_takes_no_slot_and_learns_when_to_retry():
    acquire("terra", per_second=0.1, max_wait=0)
    with pytest.raises(PaceExceeded) as refused:
        acquire("terra", per_second=0.1, max_wait=1)
    assert refused.value.key == "terra"
    assert 8.0 < refused.value.retry_after <= 9.0  # the next slot is 10 s away, 1 s may be waited
    with pytest.raises(PaceExceeded) as again:  # the refusal took nothing: the slot is the same
        acquire("terra", per_second=0.1, max_wait=1)
    assert again.value.retry_after <= refused.value.retry_after


@pytest.mark.django_db
def test_a_rate_must_be_positive():
    with pytest.raises(ValueError):
        acquire("terra", per_second=0, max_wait=1)


HAMMER = """
import sys, time
import django
django.setup()
from django.db import connection
from ops.models import OutboundPacer
from ops.pacing import acquire
if connection.vendor == "sqlite" and "outbound_pacers" not in connection.introspection.table_names():
    try:
        with connection.schema_editor() as editor:
            editor.create_model(OutboundPacer)
    except Exception:
        pass  # another process created it first
print("ready", flush=True)
sys.stdin.readline()  # every process starts hammering at once
for _ in range(int(sys.argv[2])):
    acquire("clinic", per_second=float(sys.argv[1]), max_wait=60)
    print(time.time(), flush=True)
"""
PROCESSES, CALLS, PER_SECOND = 4, 12, 8.0


def _hammer(url: str) -> list[float]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    argv = [sys.executable, "-c", HAMMER, str(PER_SECOND), str(CALLS)]
    procs = [
        subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    stamps = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        stamps += [float(line) for line in out.split()]
    return sorted(stamps)


def _most_in_one_second(stamps: list[float]) -> int:
    return max(sum(1 for t in stamps if start <= t < start + 1.0) for start in stamps)


def _assert_paced(stamps: list[float]) -> None:
    assert len(stamps) == PROCESSES * CALLS
    # Unpaced, 4 processes make their 48 calls within a fraction of a second. Paced, any one
    # second holds PER_SECOND calls; a call made late (its process woke up late on this shared
    # machine) can share a second with the slots after it: two calls of slack.
    assert _most_in_one_second(stamps) <= PER_SECOND + 2
    # Over the whole run the rate is the limit: 48 calls span at least 47 intervals (less the
    # first call's wake-up delay, which only shortens the span measured).
    assert (len(stamps) - 1) / (stamps[-1] - stamps[0]) <= PER_SECOND * 1.1


@pytest.mark.postgres_only
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_four_processes_hammering_one_key_on_postgresql_stay_within_its_rate():
    _assert_paced(_hammer(database_url()))


@pytest.mark.postgres_only  # real processes: run once, in the PostgreSQL pass
@pytest.mark.slow
def test_four_processes_hammering_one_key_on_a_sqlite_file_stay_within_its_rate(tmp_path):
    _assert_paced(_hammer(f"sqlite:///{tmp_path / 'pacer.sqlite3'}"))

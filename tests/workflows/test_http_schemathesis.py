"""Schemathesis against /api/schema/: every /v1/workflows operation, fuzzed from the schema on
a live server, must never answer 5xx. Runs the `st` CLI in a real process with a bounded,
seeded number of examples; skipped when schemathesis is not installed (dev extra)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ops.services import api_key_create
from tests.workflows.test_http_support import ALL_SCOPES

ST = Path(sys.executable).parent / "st"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not ST.exists() and not shutil.which("st"), reason="schemathesis is not installed"
    ),
]


def test_no_workflow_route_answers_a_server_error(live_server, harness, tmp_path):
    _, raw = api_key_create(name="fuzz", scopes=list(ALL_SCOPES))
    # Something to find: a waiting instance and a complete one.
    harness.create("h5-approval", id="o1", params={"order": 1})
    harness.create("h5-ver", id="v1")
    result = subprocess.run(
        [
            str(ST if ST.exists() else shutil.which("st")),
            "run",
            f"{live_server.url}/api/schema/",
            "--url",
            live_server.url,
            "--include-path-regex",
            "^/v1/workflows",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "10",
            "--seed",
            "20261121",
            "--phases",
            "examples,coverage,fuzzing",
            "--header",
            f"X-Admin-Key: {raw}",
            "--header",
            "Idempotency-Key: fuzz",
            "--request-timeout",
            "30",
            "--max-time",
            "60",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # keeps .hypothesis/ and reports out of the repository
    )
    print(result.stdout[-3000:])  # the run summary, shown with -s
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]

"""`make run` (manage.py rundemo) as a newcomer meets it: a taken port is refused before any key
is printed, and a second terminal's `manage.py workflows` sees the demo workflow. The feed's
minute: tests/demo/test_feed.py; logins and logs: tests/demo/test_logins_and_logs.py."""

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
URL = "http://testserver/webhook/terra"


class Answers200(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def demo_env(tmp_path) -> dict:
    """A fresh checkout's environment: demo mode, SQLite under tmp_path, default logging."""
    own = ("DATABASE_URL", "WORKFLOWS_", "TERRA_", "LOG_LEVEL", "DEMO_VERBOSE", "PORT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    return {**env, "VAR_DIR": str(tmp_path / "var"), "TERRA_API_KEY": ""}


def test_a_taken_port_is_refused_before_the_banner_and_keys(tmp_path):
    # Seen: with another server on :8000, make run printed "vitalflow is running" and fresh
    # keys for a server that was not ours.
    other = HTTPServer(("127.0.0.1", 0), Answers200)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    command = [sys.executable, "manage.py", "rundemo", "--port", str(port), "--no-feed"]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=demo_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    finally:
        other.shutdown()
    assert proc.returncode not in (0, None)
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert "vitalflow is running" not in out and "X-Admin-Key" not in out


@pytest.mark.slow
def test_manage_py_workflows_in_a_second_terminal_sees_the_demo_workflow(tmp_path):
    # Seen: `manage.py workflows list` beside make run answered an empty list, and the console
    # of another process showed the demo instances as version_missing.
    env = demo_env(tmp_path)
    for args in (["migrate", "-v0"], ["workflows", "list"]):
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
    assert "demo-onboarding" in result.stdout


def test_make_run_starts_a_workflow_runner_so_timers_fire_on_time():
    # The cluster's wake tasks follow new work, not the clock: without a runner a 20 s sleep
    # waited for the one-minute sweep.
    from demo.management.commands.rundemo import Command
    from ops.supervisor import bind_listener

    sock = bind_listener("127.0.0.1", 0)
    try:
        children = {child.name: child.argv for child in Command().children(sock)}
    finally:
        sock.close()
    assert set(children) == {"web", "cluster", "runner"}
    assert "runworkflows" in children["runner"]

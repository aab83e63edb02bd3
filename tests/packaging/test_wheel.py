"""The built wheel is a working install: `pip install` of it into a fresh venv, `vitalflow
migrate` from an empty directory, and every console page renders from the installed templates
(templates used to live in a top-level templates/ folder that no wheel contained); the demo app
ships too, so `vitalflow rundemo` and the graph demo run from the wheel."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.demo.terminal import free_port, read_logins, running, wait_for

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".venv", ".git", "var", "build", "*.egg-info", "__pycache__", "tests")

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]
# Variables of this environment that would make the wheel's demo other than a fresh one's.
DEMO_ENV_OWN = (
    "DATABASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "WORKFLOWS_",
    "TERRA_",
    "LOG_LEVEL",
    "DEMO_",
)


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel built from a copy of the source tree; the project's
    dependencies come from this interpreter's site-packages through a .pth line (no network),
    which adds the folder without running its .pth files, so the editable install stays out."""
    tmp = tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, tmp / "src", ignore=SKIP)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist", tmp / "src")
    (wheel,) = (tmp / "dist").glob("vitalflow-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel)
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    Path(purelib.stdout.strip(), "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return tmp


def test_wheel_install_migrates_and_renders_every_console_page(installed):
    workdir = installed / "run"
    workdir.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(WORKFLOWS_MODULES="demo.examples", WORKFLOWS_WAKE_TASKS="false")
    bin_dir = installed / "venv" / "bin"
    run(bin_dir / "vitalflow", "migrate", "-v", "0", cwd=workdir, env=env)
    assert (workdir / "var" / "vitalflow.sqlite3").exists()  # data under the working directory
    script = Path(__file__).with_name("console_pages.py")
    result = subprocess.run(
        [bin_dir / "python", script], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    assert result.stdout.count("ok 200") >= 20, result.stdout


def test_the_wheel_ships_the_demo_and_runs_it(installed):
    # Seen: an installed wheel could not run `vitalflow rundemo` or the graph demo (the example
    # graph lived outside every package).
    (wheel,) = (installed / "dist").glob("vitalflow-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "demo/graphs/lab-out-of-range.json" in names
    assert "demo/management/commands/rundemo.py" in names
    workdir = installed / "demo-run"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(DEMO_ENV_OWN)}
    env.update(TERRA_API_KEY="")  # demo mode
    vitalflow = installed / "venv" / "bin" / "vitalflow"
    with running([vitalflow, "rundemo", "--port", str(free_port())], cwd=workdir, env=env) as out:
        wait_for("the banner", lambda: "vitalflow is running" in out.text, timeout=240)
        assert re.search(r"graph     run demo-lab-\w+-v1 waits for a clinician", out.text)
        logins = read_logins(workdir / "var" / "demo-logins.env")
        with httpx.Client(base_url=logins["BASE"], timeout=30) as client:

            def raw_events() -> int:
                answer = client.get("/v1/admin/users/demo", headers={"X-Admin-Key": logins["KEY"]})
                return answer.json()["raw_events"] if answer.status_code == 200 else 0

            wait_for("the demo feed's first load", lambda: raw_events() >= 57, timeout=120)
    graph = run(
        vitalflow, "labs_graph_demo", "--hook-url", "http://127.0.0.1:9/hook", cwd=workdir, env=env
    )
    assert graph.stdout.startswith("graph run demo-lab-")

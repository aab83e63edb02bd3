"""The built wheel is a working install: `pip install` of it into a fresh venv, `vitalflow
migrate` from an empty directory, and every console page renders from the installed templates
(templates used to live in a top-level templates/ folder that no wheel contained)."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".venv", ".git", "var", "build", "*.egg-info", "__pycache__", "tests")

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]


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

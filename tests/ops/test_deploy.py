"""What the README's Production section tells a self-hoster works as written: its env lines pass
`check --deploy --fail-level WARNING`, and the compose file / Dockerfile call the project's real
commands with options those commands accept and settings the project reads. (Images cannot be
pulled on the test machine, so the compose file is checked, not run.)"""

import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = (ROOT / "config" / "settings.py").read_text()
APP_SERVICES = ("migrate", "web", "cluster", "runner")


def production_env() -> dict[str, str]:
    """The README's Production block of VAR=value lines, each <placeholder> filled in (the same
    placeholder gets the same value, as the README asks)."""
    section = README.split("## Production", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    lines = next(
        b.strip().splitlines()
        for b in blocks
        if all(re.match(r"^[A-Z_]+=.+$", line) for line in b.strip().splitlines())
    )
    filled: dict[str, str] = {}

    def fill(match):
        return filled.setdefault(match.group(0), secrets.token_urlsafe(50))

    return dict(re.sub(r"<[^>]+>", fill, line).split("=", 1) for line in lines)


README = (ROOT / "README.md").read_text()


def test_the_readme_production_env_passes_check_deploy():
    # Seen: there was no production env to copy, and HSTS subdomains/preload could not be set.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG")}
    env.update(production_env())
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The switches come from the environment: without them the check fails again.
    env["SECURE_HSTS_PRELOAD"] = "0"
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "security.W021" in result.stdout + result.stderr


def test_every_production_variable_is_read_by_the_settings_or_the_database_image():
    for name in production_env():
        assert name.startswith("POSTGRES_") or f'"{name}"' in SETTINGS, name


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def _check_command(argv: list[str]) -> None:
    """argv is `vitalflow <command> ...` with a command this project has and options it takes."""
    assert argv[0] == "vitalflow", argv
    name, options = argv[1], argv[2:]
    commands = get_commands()
    assert name in commands, f"no management command {name!r}"
    command = load_command_class(commands[name], name)
    command.create_parser("vitalflow", name).parse_args(options)  # SystemExit on a bad flag


def test_compose_services_run_the_projects_real_commands(compose):
    services = compose["services"]
    assert {"db", "redis", *APP_SERVICES} <= set(services)
    for name in APP_SERVICES:
        command = services[name]["command"]
        if command[:2] == ["sh", "-c"]:
            for part in command[2].split("&&"):
                _check_command(shlex.split(part))
        else:
            _check_command(command)
    assert "serve" in services["web"]["command"] and "--only" in services["web"]["command"]
    # The console scripts the commands start with exist in the package.
    assert 'vitalflow = "config.manage:main"' in (ROOT / "pyproject.toml").read_text()


def test_compose_healthchecks_probe_real_endpoints_and_order_the_start(compose):
    services = compose["services"]
    probe = " ".join(services["web"]["healthcheck"]["test"])
    path = re.search(r"http://127\.0\.0\.1:8000(/[a-z]+)", probe).group(1)
    assert path == "/readyz"
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert "ping" in services["redis"]["healthcheck"]["test"]
    for name in ("cluster", "runner"):
        assert services[name]["depends_on"]["web"]["condition"] == "service_healthy"
    assert services["web"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )


def test_compose_env_names_are_the_projects(compose):
    services = compose["services"]
    for name in APP_SERVICES:
        assert services[name]["env_file"] == "vitalflow.env"
    env = production_env()
    # DATABASE_URL and REDIS_URL point at the compose services, with the db image's password.
    assert "@db:5432/vitalflow" in env["DATABASE_URL"]
    assert env["REDIS_URL"].startswith("redis://redis:6379")
    db_env = services["db"]["environment"]
    assert f"{db_env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@" in env["DATABASE_URL"]
    assert env["DATABASE_URL"].endswith("/" + db_env["POSTGRES_DB"])


def test_the_dockerfile_installs_the_wheel_and_starts_serve():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (\S+) ", dockerfile, re.M):
        for path in source.split():
            assert (ROOT / path).exists(), path
    for line in re.findall(r"^COPY ([^\n]+) \./$", dockerfile, re.M):
        for path in line.split():
            assert (ROOT / path).exists(), path
    cmd = yaml.safe_load(re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1))
    _check_command(cmd)
    assert "collectstatic" in dockerfile and "pip install" in dockerfile

"""What a packager reads (item 5): the Apache-2.0 license with its text, a changelog,
and the optional extras for S3 storage and OpenTelemetry."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_license_is_apache_2_with_its_text_shipped():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_there_is_a_changelog():
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")


def test_the_s3_and_otel_extras_name_their_libraries():
    extras = PROJECT["optional-dependencies"]
    assert any(req.startswith("django-storages[s3]") for req in extras["s3"])
    assert any(req.startswith("opentelemetry-api") for req in extras["otel"])

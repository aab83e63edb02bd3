"""The demo app stays on top: no shipped module outside demo/ imports it (the Terra client and
the s3_payload downloads get the simulator through their set_transport hooks), and it is
installed and packaged so `make run` and an installed wheel have it."""

import ast
import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _shipped_packages() -> list[str]:
    """Top-level packages the wheel ships, from pyproject's find patterns ("ops*" → "ops")."""
    return [pattern.rstrip("*") for pattern in PYPROJECT["packages"]["find"]["include"]]


def _imports_demo(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name == "demo" or name.startswith("demo.")]
    return found


def test_no_module_outside_demo_imports_it():
    # Seen: the Terra client and the s3_payload normalizer imported the simulator.
    files = [ROOT / "manage.py"] + [
        path
        for package in _shipped_packages()
        if package != "demo"
        for path in (ROOT / package).rglob("*.py")
    ]
    assert len(files) > 100  # the scan found the code
    offenders = {
        str(path.relative_to(ROOT)): found for path in files if (found := _imports_demo(path))
    }
    assert offenders == {}


def test_the_demo_app_is_installed_and_shipped_with_its_example_graph():
    assert "demo" in settings.INSTALLED_APPS
    assert "demo" in _shipped_packages()
    patterns = PYPROJECT["package-data"]["demo"]
    shipped = [p for pattern in patterns for p in (ROOT / "demo").glob(pattern)]
    assert ROOT / "demo" / "graphs" / "lab-out-of-range.json" in shipped

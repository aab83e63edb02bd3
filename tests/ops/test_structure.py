"""ops' layout rules, checked on the source: ops imports no app (the apps build on it), its SQL
sits in its store modules, and ops/pgwire.py drives psycopg through its documented API only."""

import ast
import re
from pathlib import Path

from tests.structure import code_strings

OPS = Path(__file__).resolve().parents[2] / "ops"
APPS = ("ingest", "workflows", "graphs", "labs", "demo")
SQL = re.compile(r"(INSERT INTO|DELETE FROM|UPDATE [a-z_\"]+ SET|SKIP LOCKED|ON CONFLICT|SELECT )")
STORES = {"store.py", "auditstore.py", "ratestore.py"}


def _modules():
    return [p for p in OPS.rglob("*.py") if "migrations" not in p.parts]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_ops_imports_no_app():
    wrong = {
        f"{path.relative_to(OPS.parent)}: {name}"
        for path in _modules()
        for name in _imports(path)
        if name.split(".")[0] in APPS
    }
    assert not wrong, sorted(wrong)


def test_ops_sql_text_lives_in_its_store_modules():
    found = {
        f"{path.relative_to(OPS.parent)}: {text[:60]!r}"
        for path in _modules()
        if path.name not in STORES and "management" not in path.parts
        for text in code_strings(path)
        if SQL.search(text)
    }
    assert not found, sorted(found)


def test_pgwire_uses_only_psycopgs_documented_api():
    source = (OPS / "pgwire.py").read_text()
    for internal in (
        "psycopg.generators",
        "generators",
        "pgconn.",
        "send_query",
        "send_prepare",
        "psycopg.pq",
        "Transformer",
        "error_from_result",
    ):
        assert internal not in source, internal

"""The engine's layout, checked on the source: workflows/engine/ is one package whose imports
point down only (never to services, the HTTP layer, the admin or the CLI), its SQL lives in
engine/store.py alone, every create goes through create_instance, and no module of workflows/
passes 500 lines."""

import ast
import re
from pathlib import Path

from tests.structure import code_strings, imports, modules

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "workflows"
ENGINE = WORKFLOWS / "engine"
# The statements a store holds; a docstring or comment may name them, code may not.
SQL = re.compile(
    r"(INSERT INTO|DELETE FROM|UPDATE [a-z_\"]+ SET|SKIP LOCKED|ON CONFLICT|SELECT |NOTIFY |LISTEN )"
)
ABOVE_THE_ENGINE = (
    "workflows.services",
    "workflows.http",
    "workflows.admin",
    "workflows.cli",
    "workflows.api",
    "workflows.actions",
    "workflows.management",
    "workflows.testing",
)


def test_the_engine_never_imports_the_layers_above_it():
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules(ENGINE)
        for name in imports(path)
        if name.startswith(ABOVE_THE_ENGINE)
    }
    assert not wrong, sorted(wrong)


def test_the_old_runner_package_is_gone():
    assert not list((WORKFLOWS / "runner").glob("*.py"))  # a stale __pycache__ may stay
    assert not (WORKFLOWS / "create_statement.py").exists()
    for path in modules(ROOT / "workflows") + modules(ROOT / "graphs") + modules(ROOT / "labs"):
        assert not any(n.startswith("workflows.runner") for n in imports(path)), path


def test_sql_text_lives_only_in_the_engine_store():
    found = {
        f"{path.relative_to(ROOT)}: {text[:60]!r}"
        for path in modules(WORKFLOWS)
        if path != ENGINE / "store.py"
        for text in code_strings(path)
        if SQL.search(text)
    }
    assert not found, sorted(found)


def test_every_store_statement_has_a_comment_or_docstring_saying_what_it_does():
    lines = (ENGINE / "store.py").read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    bare = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id.isupper():
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if not above.startswith("#"):
                bare.append(node.targets[0].id)
        elif (
            isinstance(node, ast.FunctionDef)
            and not node.name.startswith("_")
            and ast.get_docstring(node) is None
        ):
            bare.append(node.name)
    assert not bare, bare


def test_only_the_engine_create_module_inserts_instances():
    # One road: every other module creates through create_instance.
    saves = re.compile(
        r"(?<!class )WorkflowInstance\(|WorkflowInstance\.objects\.(create|bulk_create)\("
    )
    found = [
        str(path.relative_to(ROOT))
        for path in modules(WORKFLOWS) + modules(ROOT / "graphs") + modules(ROOT / "labs")
        if path != ENGINE / "create.py" and saves.search(path.read_text())
    ]
    assert not found, found


APPS = ("config", "ops", "ingest", "labs", "workflows", "graphs", "demo")


def test_no_module_of_the_project_passes_500_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts and (n := len(path.read_text().splitlines())) > 500
    }
    assert not long, long

"""Import structure of ingest and labs: no import loops (function-level imports included), and
domain code never reaches up into the HTTP layer for its errors."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module this file imports, at any depth (a lazy import still forms a loop)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _graph(app: str) -> dict[str, set[str]]:
    files = [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]
    modules = {_module_name(p): p for p in files}
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("app", ["ingest", "labs"])
def test_no_import_loops(app):
    # Seen: consumer → users → services → consumer (the last two as function-level imports).
    assert _cycle(_graph(app)) is None


@pytest.mark.parametrize("app", ["ingest", "labs"])
def test_domain_code_does_not_import_the_api_layer(app):
    # Seen: selectors, sync and imports raised errors defined in ingest/api/errors.py.
    graph = _graph(app)
    http_layer = (f"{app}.api", f"{app}.views", f"{app}.urls", f"{app}.serializers")
    offenders = {
        module: sorted(target for target in targets if target.startswith(http_layer))
        for module, targets in graph.items()
        if not module.startswith(http_layer) and module not in (f"{app}.admin",)
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_ingest_and_labs_errors_render_as_their_status():
    from ingest.errors import RawEventNotFound
    from labs.errors import FileTooLarge

    assert RawEventNotFound("x").body() == {"code": "raw_event_not_found", "message": "x"}
    assert RawEventNotFound("x").status == 404
    assert FileTooLarge("big", max_bytes=1).body()["max_bytes"] == 1
    assert FileTooLarge("big").status == 413


SQL = re.compile(
    r"INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+[a-z_\"]+\s+SET|SELECT\s.+\sFROM\s|ON\s+CONFLICT"
    r"|SKIP\s+LOCKED|\.execute\(|\.raw\(",
    re.IGNORECASE,
)


def test_sql_text_lives_only_in_the_store():
    # Seen: 101 SQL literals in 17 modules, assembled by f-strings, a write with several roads.
    offenders = []
    for path in sorted((ROOT / "ingest").rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if "store" in parts or "migrations" in parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SQL.search(line) and not line.lstrip().startswith("#"):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []

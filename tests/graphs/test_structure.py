"""Layering of the graphs app: graphs → workflows → ops only, nothing below imports graphs, no
import loops inside graphs, and its domain code never imports its HTTP layer."""

from pathlib import Path

from tests.ingest.test_structure import _cycle, _graph, _imports

ROOT = Path(__file__).resolve().parents[2]


def _all_imports(app: str) -> set[str]:
    found = set()
    for path in (ROOT / app).rglob("*.py"):
        if "migrations" not in path.parts:
            found |= _imports(path)
    return found


def test_no_import_loops_in_graphs():
    assert _cycle(_graph("graphs")) is None


def test_graphs_imports_only_downward_and_nothing_below_imports_it():
    upward = {m for m in _all_imports("graphs") if m.split(".")[0] in ("ingest", "labs")}
    assert upward == set()
    for app in ("workflows", "ops"):
        assert {m for m in _all_imports(app) if m.split(".")[0] == "graphs"} == set(), app


def test_graphs_domain_code_does_not_import_its_api_layer():
    graph = _graph("graphs")

    def in_http_layer(module: str) -> bool:
        return any(
            module == p or module.startswith(p + ".") for p in ("graphs.http", "graphs.urls")
        )

    offenders = {
        module: sorted(t for t in targets if in_http_layer(t))
        for module, targets in graph.items()
        if not in_http_layer(module) and module != "graphs.admin"
    }
    assert {m: t for m, t in offenders.items() if t} == {}

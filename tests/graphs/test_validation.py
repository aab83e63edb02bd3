"""The vocabulary's validation: each mistake is InvalidGraph naming the offending ref."""

import pytest

from graphs.errors import InvalidGraph
from tests.graphs.helpers import doc, node, parse


def t(src, dst, **extra):
    return {"from": src, "to": dst, **extra}


def refused(document) -> InvalidGraph:
    with pytest.raises(InvalidGraph) as info:
        parse(document)
    assert info.value.status == 400 and info.value.code == "invalid_graph"
    return info.value


def test_a_valid_definition_parses():
    graph = parse(doc([node("a"), node("b")], [t("a", "b")]))
    assert graph.initial_node == "a" and [x.ref for x in graph.transitions] == ["a->b"]


def test_unknown_node_ref_in_a_transition_names_the_transition():
    error = refused(doc([node("a")], [t("a", "ghost", ref="go")]))
    assert error.extra["ref"] == "go" and "ghost" in error.message


def test_unknown_initial_node():
    assert refused(doc([node("a")], [], initial="zzz")).extra["ref"] == "zzz"


def test_unreachable_node_is_named():
    error = refused(doc([node("a"), node("b"), node("island")], [t("a", "b")]))
    assert error.extra["ref"] == "island"


def test_fan_in_without_matching_fan_out():
    document = doc(
        [node("a"), node("b"), node("c")],
        [t("a", "b", ref="plain"), t("b", "c", ref="join", synchronization={"fan_out": "plain"})],
    )
    assert refused(document).extra["ref"] == "join"


def test_fan_in_naming_a_missing_transition():
    document = doc(
        [node("a"), node("b")], [t("a", "b", ref="j", synchronization={"fan_out": "nope"})]
    )
    assert refused(document).extra["ref"] == "j"


def test_unknown_python_action_name():
    error = refused(doc([node("a", name="no.such.action")], []))
    assert error.extra["ref"] == "a" and "no.such.action" in error.message


def test_unknown_workflow_and_action_kind():
    assert (
        refused(doc([node("a", "workflow", action={"workflow": "nope"})], [])).extra["ref"] == "a"
    )
    assert refused(doc([node("a", "eval", action={"code": "1"})], [])).extra["ref"] == "a"


@pytest.mark.parametrize(
    "mapping",
    [
        {"input_mapping": {"x": "no-slash"}},
        {"output_mapping": {"no-slash": ""}},
        {"output_mapping": {"/input/x": ""}},  # the run input is read-only
        {"output_mapping": {"": ""}},  # the whole context is never replaced
        {"output_mapping": {"/branch": ""}},
    ],
)
def test_bad_mappings_name_the_node(mapping):
    assert refused(doc([node("a", **mapping)], [])).extra["ref"] == "a"


def test_invalid_json_schema():
    error = refused(doc([node("a")], [], input_schema={"type": "not-a-type"}))
    assert error.extra["field"] == "input_schema"


def test_cycle_without_loop_limit_names_the_closing_transition():
    document = doc([node("a"), node("b")], [t("a", "b", ref="fwd"), t("b", "a", ref="back")])
    error = refused(document)
    assert error.extra["ref"] == "back" and "max_iterations" in error.message
    document["transitions"][1]["loop_config"] = {"max_iterations": 5}
    parse(document)


def test_self_loop_needs_a_limit():
    assert refused(doc([node("a")], [t("a", "a", ref="again")])).extra["ref"] == "again"


@pytest.mark.parametrize(
    "transition",
    [
        {"condition": "score > 3"},
        {"priority": -1},
        {"foreach": {"collection": "/x"}, "spawn_count": 2},
        {"spawn_count": 0},
        {"unknown_key": 1},
    ],
)
def test_bad_transitions_name_the_transition(transition):
    assert (
        refused(doc([node("a"), node("b")], [t("a", "b", ref="x", **transition)])).extra["ref"]
        == "x"
    )


def test_bad_durations_and_http_urls():
    assert refused(doc([node("a", "sleep", action={"duration": "soon"})], [])).extra["ref"] == "a"
    assert refused(doc([node("a", "http", action={"url": "ftp://x"})], [])).extra["ref"] == "a"
    assert refused(doc([node("a", timeout="-1 s")], [])).extra["ref"] == "a"


def test_bad_merge_strategy():
    document = doc(
        [node("a"), node("b"), node("c")],
        [
            t("a", "b", ref="each", spawn_count=2),
            t(
                "b",
                "c",
                ref="j",
                synchronization={
                    "fan_out": "each",
                    "merge": {"source": "/x", "target": "/y", "strategy": "sum"},
                },
            ),
        ],
    )
    assert refused(document).extra["ref"] == "j"


def test_duplicate_node_refs():
    assert refused(doc([node("a"), node("a")], [])).extra["ref"] == "a"


def test_url_placeholders_must_come_from_the_input_mapping():
    url = {"url": "https://hooks.test/m/{code}"}
    assert refused(doc([node("a", "http", action=url)], [])).extra["field"] == "action.url"
    assert (
        refused(doc([node("a", "http", action={"url": "https://h.test/{x.y}"})], [])).extra["ref"]
        == "a"
    )
    parse(doc([node("a", "http", action=url, input_mapping={"code": "/input/code"})], []))

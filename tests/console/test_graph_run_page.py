"""The graph run page draws the definition coloured by token state (done, running, waiting for
a person, failed, not reached) with the path taken in bold, and shows node outputs as JSON."""

import re

from graphs import drawing


def node_state(html, ref):
    found = re.search('<g class="vf-node" data-node="' + ref + r'" data-state="(\w+)"', html)
    return found and found.group(1)


def test_the_waiting_human_node_is_coloured_waiting_and_the_rest_by_state(console, approval_run):
    html = console.get(f"/admin/graphs/graphrun/{approval_run.pk}/change/").content.decode()
    assert node_state(html, "ack") == "waiting"
    assert node_state(html, "load") == "done" and node_state(html, "work") == "done"
    assert (
        node_state(html, "done") == "not_reached" and node_state(html, "escalate") == "not_reached"
    )
    assert html.count('class="vf-taken"') == 2  # load → work, work → ack
    assert "waiting for a person" in html


def test_node_outputs_are_formatted_json_not_python_reprs(console, approval_run):
    html = console.get(f"/admin/graphs/graphrun/{approval_run.pk}/change/").content.decode()
    assert "&quot;items&quot;: [" in html  # json.dumps(indent=2) of load's output
    assert "{&#x27;items&#x27;" not in html  # never a repr with single quotes


def test_node_states_rank_the_worst_token_of_a_node_first():
    states = drawing.node_states(
        [
            ("a", "completed"),
            ("a", "failed"),
            ("h", "executing"),
            ("b", "pending"),
            ("c", "cancelled"),
        ],
        human_nodes={"h"},
    )
    assert states == {"a": "failed", "h": "waiting", "b": "running", "c": "not_reached"}


def test_the_definition_page_keeps_its_uncoloured_drawing(console, approval_run):
    page = console.get(f"/admin/graphs/graphdefinition/{approval_run.definition_id}/change/")
    assert 'data-state=""' in page.content.decode()

"""Instance labels: set at create (programmatic and HTTP), validated, and filtered on with
?label=key:value (repeatable, AND) in the API, the console and vitalflow-wf."""

import pytest

from tests.workflows import test_cli
from tests.workflows.test_http_support import ALL_SCOPES, create
from workflows import get_workflow
from workflows.errors import InvalidLabels
from workflows.models import WorkflowInstance, WorkflowInstanceLabel


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


server, wf = test_cli.server, test_cli.wf  # the live-server CLI fixtures


def _ids(response):
    assert response.status_code == 200, response.json()
    return [row["id"] for row in response.json()["instances"]]


def test_programmatic_create_stores_labels_and_their_index_rows(db):
    get_workflow("h5-approval").create(id="a1", labels={"user": "alice", "tier": "gold"})
    row = WorkflowInstance.objects.get(instance_id="a1")
    assert row.labels == {"user": "alice", "tier": "gold"}
    pairs = set(WorkflowInstanceLabel.objects.values_list("key", "value"))
    assert pairs == {("user", "alice"), ("tier", "gold")}


@pytest.mark.parametrize(
    "labels",
    [
        {f"k{i}": "v" for i in range(11)},
        {"x" * 33: "v"},
        {"has:colon": "v"},
        {"-lead": "v"},
        {"": "v"},
        {"user": "x" * 65},
        {"user": "line\nbreak"},
        {"user": 5},
        ["user", "alice"],
    ],
)
def test_invalid_labels_are_refused(db, labels):
    with pytest.raises(InvalidLabels):
        get_workflow("h5-approval").create(id="bad", labels=labels)
    assert not WorkflowInstance.objects.filter(instance_id="bad").exists()


def test_edge_of_the_limits_is_accepted(db):
    labels = {f"k{i}": "v" for i in range(9)} | {"k" * 32: "é:" + "v" * 62}
    get_workflow("h5-approval").create(id="edge", labels=labels)
    assert WorkflowInstance.objects.get(instance_id="edge").labels == labels


def test_http_create_takes_labels_and_the_detail_shows_them(ops_api):
    response = create(ops_api, id="h1", labels={"user": "alice"})
    assert response.status_code == 201
    detail = ops_api.get("/v1/workflows/h5-approval/instances/h1").json()
    assert detail["meta"]["labels"] == {"user": "alice"}


def test_http_create_with_bad_labels_is_400_invalid_labels(ops_api):
    response = create(ops_api, id="h1", labels={"bad key": "x"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_labels")


def test_label_filters_are_anded_and_repeatable(ops_api):
    create(ops_api, id="a", labels={"user": "alice", "tier": "gold"})
    create(ops_api, id="b", labels={"user": "alice"})
    create(ops_api, id="c", labels={"user": "bob", "tier": "gold"})
    create(ops_api, id="d")
    url = "/v1/workflows/h5-approval/instances"
    assert _ids(ops_api.get(url, {"label": "user:alice"})) == ["b", "a"]
    assert _ids(ops_api.get(url, {"label": ["user:alice", "tier:gold"]})) == ["a"]
    assert _ids(ops_api.get(url, {"label": "tier:gold"})) == ["c", "a"]
    assert _ids(ops_api.get(url, {"label": "user:carol"})) == []
    assert _ids(ops_api.get(url)) == ["d", "c", "b", "a"]


def test_label_filter_value_may_contain_a_colon(ops_api):
    create(ops_api, id="a", labels={"url": "http://x"})
    url = "/v1/workflows/h5-approval/instances"
    assert _ids(ops_api.get(url, {"label": "url:http://x"})) == ["a"]


def test_malformed_label_filter_is_400(ops_api):
    response = ops_api.get("/v1/workflows/h5-approval/instances", {"label": "nocolon"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_labels")


def test_batch_items_may_carry_labels(ops_api):
    from tests.workflows.test_http_support import new_key

    response = ops_api.post(
        "/v1/workflows/h5-approval/instances/batch",
        {"instances": [{"id": "b1", "labels": {"user": "alice"}}, {"id": "b2"}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=new_key(),
    )
    assert response.status_code == 201
    url = "/v1/workflows/h5-approval/instances"
    assert _ids(ops_api.get(url, {"label": "user:alice"})) == ["b1"]


def test_console_list_filters_by_label(client, staff):
    get_workflow("h5-approval").create(id="a", labels={"user": "alice"})
    get_workflow("h5-approval").create(id="b", labels={"user": "bob"})
    client.force_login(staff)
    page = client.get("/admin/workflows/workflowinstance/", {"label": "user:alice"})
    assert page.status_code == 200
    shown = [obj.instance_id for obj in page.context["cl"].result_list]
    assert shown == ["a"]
    detail = client.get(
        f"/admin/workflows/workflowinstance/{WorkflowInstance.objects.get(instance_id='a').pk}/change/"
    )
    assert b"user: alice" in detail.content


def test_cli_lists_by_label_and_creates_with_labels(wf):
    code, out, err = wf("instances", "create", "-w", "h5-approval", "--id", "c1", "-l", "user:al")
    assert code == 0, err
    wf("instances", "create", "-w", "h5-approval", "--id", "c2", "-l", "user:bo")
    code, out, err = wf("instances", "list", "-w", "h5-approval", "--label", "user:al")
    assert code == 0, err
    assert "c1" in out and "c2" not in out
    code, out, _ = wf("instances", "get", "-w", "h5-approval", "--id", "c1")
    assert "labels:   user:al" in out

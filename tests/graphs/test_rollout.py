"""Rolling out and back without a deploy (API, CLI, console; both databases): canary runs on an
explicit version beside the binding's pointer, bindings disabled and enabled (audited, with the
actor), definitions' tags as list filters."""

import pytest

from graphs import services
from graphs.models import GraphBinding, GraphRun
from ops.models import AuditLog
from tests.graphs.helpers import doc, node
from tests.graphs.test_api import publish, start
from tests.graphs.test_cli import vf  # noqa: F401 - the CLI fixture

ALL = ("graphs:read", "graphs:write", "graphs:run", "graphs:approve")


@pytest.fixture
def api(operator_api):
    return operator_api(*ALL, name="release-bot")


def ask_doc(outcome: str, **extra):
    return doc(
        [
            node("ask", "human", action={"event_type": "ok"}),
            node("end", "set", action={"values": {"/outcome": {"value": outcome}}}),
        ],
        [{"from": "ask", "to": "end"}],
        name="release",
        **extra,
    )


def two_versions(api):
    publish(api, ask_doc("v1", tags=["labs"]))
    publish(api, ask_doc("v2", tags=["labs", "canary"]))
    bound = api.post(
        "/v1/graphs/bindings",
        {"name": "rel", "definition": "release", "pinned_version": 1},
        format="json",
    )
    assert bound.status_code == 201 and bound.json()["enabled"] is True


def canary(api, version, key):
    return api.post(
        "/v1/graphs/bindings/rel/runs",
        {"input": {}, "version": version},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_a_canary_runs_an_explicit_version_beside_the_bindings_pointer(api, harness):
    two_versions(api)
    tried = canary(api, 2, "canary-1")
    assert tried.status_code == 201 and tried.json()["version"] == 2
    assert start(api, "rel", {}, key="normal").json()["version"] == 1  # the pointer stays
    assert GraphBinding.objects.get(name="rel").pinned_version == 1
    row = AuditLog.objects.get(action="graph_run.create", metadata__version=2)
    assert row.metadata == {"binding": "rel", "version": 2, "canary": True}
    assert row.actor.startswith("api_key:") and row.actor.endswith(":release-bot")

    harness.run_until_idle()
    api.post(f"/v1/graphs/runs/{tried.json()['id']}/events", {"type": "ok"}, format="json")
    harness.run_until_idle()
    assert api.get(f"/v1/graphs/runs/{tried.json()['id']}").json()["output"]["outcome"] == "v2"

    assert canary(api, 9, "canary-9").json()["code"] == "definition_not_found"
    api.post("/v1/graphs/definitions", ask_doc("v3"), format="json")  # v3 stays a draft
    draft = canary(api, 3, "canary-3")
    assert draft.status_code == 409 and draft.json()["code"] == "no_published_version"


def test_a_disabled_binding_refuses_new_runs_while_running_ones_finish(api, harness):
    two_versions(api)
    running = start(api, "rel", {}, key="before").json()["id"]
    harness.run_until_idle()

    disabled = api.post("/v1/graphs/bindings/rel/disable")
    assert disabled.status_code == 200 and disabled.json()["enabled"] is False
    refused = start(api, "rel", {}, key="after")
    assert refused.status_code == 409 and refused.json()["code"] == "disabled"
    assert canary(api, 2, "canary-after").json()["code"] == "disabled"

    api.post(f"/v1/graphs/runs/{running}/events", {"type": "ok"}, format="json")
    harness.run_until_idle()
    assert api.get(f"/v1/graphs/runs/{running}").json()["status"] == "complete"

    assert api.post("/v1/graphs/bindings/rel/enable").json()["enabled"] is True
    assert start(api, "rel", {}, key="again").status_code == 201
    rows = AuditLog.objects.filter(resource="graph_binding:rel").order_by("id")
    actor = AuditLog.objects.filter(action="graph_run.create").first().actor
    assert actor.endswith(":release-bot")
    assert [(r.action, r.actor) for r in rows if r.action != "graph_binding.create"] == [
        ("graph_binding.disable", actor),
        ("graph_binding.enable", actor),
    ]
    assert api.post("/v1/graphs/bindings/nope/disable").status_code == 404
    reader = pytest.importorskip("rest_framework.test").APIClient()
    assert reader.post("/v1/graphs/bindings/rel/disable").status_code == 401


def test_tags_filter_definitions_and_runs(api, harness):
    two_versions(api)
    start(api, "rel", {}, key="v1-run")
    canary_run = canary(api, 2, "v2-run").json()["id"]
    tagged = api.get("/v1/graphs/definitions?tag=canary").json()["definitions"]
    assert [(d["version"], d["tags"]) for d in tagged] == [(2, ["labs", "canary"])]
    assert len(api.get("/v1/graphs/definitions?tag=labs").json()["definitions"]) == 2
    assert api.get("/v1/graphs/definitions?tag=none").json()["definitions"] == []
    runs = api.get("/v1/graphs/runs?tag=canary").json()["runs"]
    assert [r["id"] for r in runs] == [canary_run]
    bad = api.post("/v1/graphs/definitions", {**ask_doc("x"), "tags": ["no spaces"]}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "tags"


def test_canary_disable_and_enable_from_the_cli(vf):  # noqa: F811 - the fixture
    for outcome in ("v1", "v2"):
        definition = services.definition_create(document=ask_doc(outcome, tags=["labs"]))
        services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="rel", definition="release", pinned_version=1)
    code, out, err = vf("graphs", "run", "--binding", "rel", "--version", "2", "--input", "{}")
    assert code == 0 and " rel v2 " in out, err
    assert "release  v2" in vf("graphs", "list", "--tag", "labs")[1]
    code, out, err = vf("graphs", "disable", "--binding", "rel")
    assert code == 0 and "disabled" in out, err
    code, _, err = vf("graphs", "run", "--binding", "rel", "--input", "{}")
    assert code == 1 and "disabled" in err
    code, out, _ = vf("graphs", "enable", "--binding", "rel")
    assert code == 0 and "rel  enabled" in out
    assert GraphRun.objects.count() == 1


def test_the_console_disables_after_confirming_and_filters_definitions_by_tag(client, staff):
    client.force_login(staff)
    definition = services.definition_create(document=ask_doc("v1", tags=["clinic"]))
    services.definition_publish(name=definition.name, version=definition.version)
    binding = services.binding_create(name="rel", definition="release")
    url = "/admin/graphs/graphbinding/"
    ask = client.post(url, {"action": "disable_selected", "_selected_action": [binding.pk]})
    assert ask.status_code == 200 and "Runs already started go on" in ask.content.decode()
    assert GraphBinding.objects.get(pk=binding.pk).enabled is True
    client.post(
        url, {"action": "disable_selected", "_selected_action": [binding.pk], "confirm": "yes"}
    )
    assert GraphBinding.objects.get(pk=binding.pk).enabled is False
    assert AuditLog.objects.get(action="graph_binding.disable").actor == "user:charlie"
    client.post(url, {"action": "enable_selected", "_selected_action": [binding.pk]})
    assert GraphBinding.objects.get(pk=binding.pk).enabled is True

    listed = client.get("/admin/graphs/graphdefinition/?tag_rows__name=clinic").content.decode()
    assert "release" in listed and "clinic" in listed
    other = client.get("/admin/graphs/graphdefinition/?tag_rows__name=none").content.decode()
    assert "0 graph definitions" in other or "release</a>" not in other
    runs = client.get("/admin/graphs/graphrun/?definition__tag_rows__name=clinic")
    assert runs.status_code == 200

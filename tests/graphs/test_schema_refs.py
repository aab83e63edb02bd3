"""A definition's JSON Schemas cannot reach out: `$ref`s resolve only inside the schema, nothing is
ever retrieved (a local listener counts 0 connections), unresolvable or cyclic refs are a 400
naming the schema and the ref at publish — and at run creation for a definition published
before refs were checked — never a 500, and no referenced document's content is echoed."""

import socket
import threading

import pytest

from graphs import decisions
from graphs.models import DefinitionStatus, GraphDefinition
from graphs.services import checksum
from tests.graphs.helpers import Driver, doc, node
from workflows import runtime

SECRET = "TOPSECRET-internal-token-4242"


class Listener:
    """A loopback TCP server that answers every connection with a JSON document holding SECRET
    and counts the connections it accepted."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopping = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        body = ('{"const": "%s"}' % SECRET).encode()  # noqa: UP031 - a literal JSON document
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def close(self):
        self.stopping = True
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def api(operator_api):
    return operator_api("graphs:read", "graphs:write", "graphs:run")


def schema_doc(name: str, **schemas) -> dict:
    return doc([node("a")], [], name=name, **schemas)


def publish(api, document):
    created = api.post("/v1/graphs/definitions", document, format="json")
    assert created.status_code == 201, created.json()
    return api.post(f"/v1/graphs/definitions/{document['name']}/versions/1/publish")


def published_before_checks(document) -> None:
    """A definition stored as published by a version of the service that did not check refs."""
    now = runtime.now()
    GraphDefinition.objects.create(
        name=document["name"],
        version=1,
        status=DefinitionStatus.PUBLISHED,
        document=document,
        input_schema=document.get("input_schema"),
        context_schema=document.get("context_schema"),
        initial_node=document["initial_node"],
        checksum=checksum(document),
        created_at=now,
        updated_at=now,
        published_at=now,
    )


def start(api, name):
    api.post("/v1/graphs/bindings", {"name": name, "definition": name}, format="json")
    return api.post(
        f"/v1/graphs/bindings/{name}/runs",
        {"input": {"x": "y"}},
        format="json",
        HTTP_IDEMPOTENCY_KEY=f"k-{name}",
    )


def remote_refs(port: int, secret_file) -> list[tuple[str, dict]]:
    url = f"http://127.0.0.1:{port}/schema.json"
    return [
        ("remote", {"$ref": url}),
        ("remote-nested", {"type": "object", "properties": {"x": {"$ref": url}}}),
        ("remote-defs", {"$defs": {"a": {"$ref": url + "#/x"}}, "$ref": "#/$defs/a"}),
        ("local-file", {"$ref": secret_file.as_uri()}),
        ("relative", {"$ref": "other.json"}),
    ]


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret.json"
    path.write_text('{"const": "%s"}' % SECRET)  # noqa: UP031
    return path


@pytest.mark.parametrize("field", ["input_schema", "context_schema"])
def test_a_ref_outside_the_definition_is_a_400_at_publish_and_nothing_is_retrieved(
    api, listener, secret_file, field
):
    for name, schema in remote_refs(listener.port, secret_file):
        answer = publish(api, schema_doc(f"{name}-{field.split('_')[0]}", **{field: schema}))
        body = answer.json()
        assert answer.status_code == 400, (name, body)
        assert body["code"] == "invalid_graph" and body["field"] == field
        assert field in body["message"] and body["schema_ref"] in body["message"]
        assert body["schema_ref"] in str(schema)
        assert SECRET not in str(body)
    assert listener.connections == 0


def test_a_run_of_a_definition_published_before_refs_were_checked_is_a_400_without_retrieval(
    api, listener, secret_file
):
    for name, schema in remote_refs(listener.port, secret_file):
        published_before_checks(schema_doc(name, input_schema=schema))
        answer = start(api, name)
        assert answer.status_code == 400, (name, answer.json())
        assert answer.json()["code"] == "invalid_graph"
        assert "input_schema" in answer.json()["message"]
        assert SECRET not in str(answer.json())
    assert listener.connections == 0


CYCLES = [
    ("self", {"$ref": "#"}),
    (
        "pair",
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    ),
    ("through-allof", {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}),
]
UNRESOLVABLE = [
    ("nowhere", {"$ref": "#/$defs/missing"}),
    ("not-a-schema", {"$defs": {"a": 3}, "$ref": "#/$defs/a"}),
    ("anchor", {"$ref": "#named"}),
]


@pytest.mark.parametrize(("name", "schema"), CYCLES + UNRESOLVABLE)
def test_cyclic_and_unresolvable_refs_are_a_400_at_publish_naming_schema_and_ref(api, name, schema):
    answer = publish(api, schema_doc(name, context_schema=schema))
    body = answer.json()
    assert answer.status_code == 400, body
    assert body["code"] == "invalid_graph" and body["field"] == "context_schema"
    assert body["schema_ref"] in body["message"] and "context_schema" in body["message"]


@pytest.mark.parametrize(("name", "schema"), CYCLES + UNRESOLVABLE)
def test_cyclic_and_unresolvable_refs_published_before_the_checks_are_a_400_at_run_creation(
    api, name, schema
):
    published_before_checks(schema_doc(name, input_schema=schema))
    answer = start(api, name)
    assert answer.status_code == 400, answer.json()
    assert answer.json()["code"] == "invalid_graph"


def test_local_refs_and_recursive_schemas_work(api, harness):
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "type": "object",
        "required": ["x"],
        "properties": {"x": {"type": "string"}, "tree": {"$ref": "#/$defs/node"}},
    }
    assert publish(api, schema_doc("tree", input_schema=tree)).status_code == 200
    api.post("/v1/graphs/bindings", {"name": "tree", "definition": "tree"}, format="json")

    def run(value, key):
        return api.post(
            "/v1/graphs/bindings/tree/runs",
            {"input": value},
            format="json",
            HTTP_IDEMPOTENCY_KEY=key,
        )

    good = {"x": "y", "tree": {"name": "a", "children": [{"name": "b", "children": []}]}}
    assert run(good, "good").status_code == 201
    bad = run({"x": "y", "tree": {"name": "a", "children": [{"children": []}]}}, "bad")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_input"
    assert bad.json()["errors"][0]["path"] == "/tree/children/0"


def test_a_running_graph_never_fetches_a_context_schema_ref_and_fails_naming_it(listener):
    url = f"http://127.0.0.1:{listener.port}/schema.json"
    driver = Driver(doc([node("a", output_mapping={"/x": ""})], [], context_schema={"$ref": url}))
    outcome = driver.run({"a": {"v": 1}})
    assert isinstance(outcome, decisions.Fail) and outcome.error["name"] == "ContextInvalid"
    assert url in outcome.error["message"] and SECRET not in str(outcome.error)
    assert listener.connections == 0

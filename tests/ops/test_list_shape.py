"""One list response shape for the API (item 7), checked over the OpenAPI schema so a
new list endpoint cannot bring back another style: every paginated GET answers
{"<items>": [...], "cursor": <str or null>, "has_next_page": <bool>}.

Exceptions, both documented: /v1/sync pages a multi-table pull by `since` and `next` (README,
"Sync"), and an instance's history pages its three lists side by side (`steps_cursor`, ...)."""

import pytest

EXCEPTIONS = {"/v1/sync", "/v1/workflows/{name}/instances/{instance_id}/history"}
PAGING_FIELDS = {"cursor", "next", "next_cursor", "has_next_page", "count", "results", "previous"}


@pytest.fixture
def schema(client, staff):
    client.force_login(staff)
    return client.get("/api/schema/", HTTP_ACCEPT="application/json").json()


def resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def paginated_responses(schema: dict):
    for path, operations in schema["paths"].items():
        content = operations.get("get", {}).get("responses", {}).get("200", {}).get("content", {})
        body = content.get("application/json", {}).get("schema")
        if body is None:
            continue
        body = resolve(schema, body)
        properties = body.get("properties", {})
        if any(name in PAGING_FIELDS or name.endswith("_cursor") for name in properties):
            yield path, properties


def test_every_paginated_list_answers_items_cursor_and_has_next_page(schema):
    seen = []
    for path, properties in paginated_responses(schema):
        if path in EXCEPTIONS:
            continue
        seen.append(path)
        arrays = [k for k, v in properties.items() if resolve(schema, v).get("type") == "array"]
        assert len(arrays) == 1, (path, arrays)
        assert set(properties) == {arrays[0], "cursor", "has_next_page"}, path
        assert properties["cursor"].get("nullable") is True, path
        assert properties["has_next_page"]["type"] == "boolean", path
    assert "/v1/workflows/{name}/instances" in seen and "/v1/admin/dlq" in seen
    assert len(seen) >= 8

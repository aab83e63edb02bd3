"""Writes tests/fixtures/terra/maximal_items.json: one data item per type (daily, sleep,
activity, body) with every field of Terra's OpenAPI schema filled in (arrays with two items),
so a test can check that a normalizer reads the same values from a stream-parsed item as from
the whole one. Numbers are distinct and small (0–100), timestamps are the schema's examples.

    .venv/bin/python tests/ingest/make_maximal_items.py ../shared/fixtures/terra/terra-openapi-v2.yaml
"""

import itertools
import json
import sys
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "terra" / "maximal_items.json"
TYPES = {"daily": "Daily", "sleep": "Sleep", "activity": "Activity", "body": "Body"}


def _maximal(schema: dict, schemas: dict, counter, depth: int = 0):
    if "$ref" in schema:
        return _maximal(schemas[schema["$ref"].rsplit("/", 1)[-1]], schemas, counter, depth)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [option for option in schema[key] if option.get("type") != "null"]
            return _maximal({**options[0], **_extra(schema)}, schemas, counter, depth)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 8:
            return {}
        return {
            name: _maximal(prop, schemas, counter, depth + 1)
            for name, prop in sorted(schema.get("properties", {}).items())
        }
    if kind == "array":
        return [_maximal(schema.get("items", {}), schemas, counter, depth + 1) for _ in range(2)]
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "string":
        examples = schema.get("examples") or []
        return examples[0] if examples else f"text-{next(counter)}"
    if kind == "integer":
        return next(counter) % 97 + 1
    if kind == "number":
        return next(counter) % 97 + 0.25
    if kind == "boolean":
        return False
    return None


def _extra(schema: dict) -> dict:
    return {key: schema[key] for key in ("examples",) if key in schema}


def main(spec_path: str) -> None:
    schemas = yaml.safe_load(Path(spec_path).read_text())["components"]["schemas"]
    counter = itertools.count()
    items = {kind: _maximal(schemas[name], schemas, counter) for kind, name in TYPES.items()}
    OUT.write_text(json.dumps(items, indent=1, sort_keys=True) + "\n")
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1])

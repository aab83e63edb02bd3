"""JSON Schemas of a graph definition (input_schema, context_schema): checked on publish,
applied to run inputs and contexts as a list of {"path", "message"} problems."""

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from graphs.shapes import fail


def check(raw, field: str) -> dict | None:
    """`raw` when it is a valid JSON Schema (or None), else InvalidGraph naming `field`."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        fail(f"{field} must be a JSON Schema object", field=field)
    try:
        validator_for(raw).check_schema(raw)
    except SchemaError as exc:
        fail(f"{field} is not a valid JSON Schema: {exc.message}", field=field)
    return raw

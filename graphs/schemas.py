"""JSON Schemas of a graph definition (input, context and output schemas): checked on publish,
applied to run inputs and contexts as a list of {"path", "message"} problems.

A schema never reaches out. Its `$ref`s resolve only inside the schema itself ("#" or a JSON
pointer fragment such as "#/$defs/item"); validators get a `referencing` Registry with no
retrieval (jsonschema's documented way to turn retrieval off), so an http(s)://, file:// or
relative reference is never fetched. `check_refs` finds, before anything runs, references that
point outside the schema, point nowhere, or loop without consuming input (`{"$ref": "#"}`,
a → b → a, a ref through allOf back to itself); each is an InvalidGraph naming the schema and
the ref — never the referenced content.
"""

from urllib.parse import unquote

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from graphs import pointers
from graphs.shapes import fail

NO_RETRIEVAL = Registry()  # its retrieve() refuses every URI: nothing is fetched, ever
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose subschemas apply to the same instance: a loop through them never ends.
IN_PLACE_ONE = ("not", "if", "then", "else")
IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
# Keywords whose subschemas apply to parts of the instance (or are only containers).
DEEPER_ONE = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "contentSchema",
)
DEEPER_MANY = ("prefixItems", "items")
SCHEMA_MAPS = (
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
)


def check(raw, field: str, *, refs: bool = False) -> dict | None:
    """`raw` when it is a valid JSON Schema (or None), else InvalidGraph naming `field`. With
    `refs` (publish), its references and $schema are checked too (check_refs)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        fail(f"{field} must be a JSON Schema object", field=field)
    if refs:
        check_refs(raw, field)
    try:
        validator_for(raw, default=Draft202012Validator).check_schema(raw)
    except SchemaError as exc:
        fail(f"{field} is not a valid JSON Schema: {exc.message}", field=field)
    return raw


def problems(schema: dict | None, document, *, field: str) -> list[dict]:
    """[{"path", "message"}] of `document` against `schema`, sorted by path. A reference that
    cannot be resolved (or loops) is one problem naming the ref, not an exception."""
    if schema is None:
        return []
    cls = validator_for(schema, default=Draft202012Validator)
    validator = cls(schema, registry=NO_RETRIEVAL)
    try:
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        ref = getattr(exc, "ref", "?")
        return [{"path": "", "message": f"{field}: reference {ref!r} cannot be resolved"}]
    except RecursionError:
        return [{"path": "", "message": f"{field}: its references loop without end"}]
    return [
        {"path": "/" + "/".join(str(p) for p in e.absolute_path), "message": e.message}
        for e in errors
    ]


def check_refs(schema: dict, field: str) -> None:
    """InvalidGraph when `schema` names an unknown $schema, nests an $id (which would move the
    base its references resolve against), or holds a reference that leaves the schema, points
    nowhere, or loops back to itself without consuming input."""
    if "$schema" in schema and validator_for(schema, default=None) is None:
        fail(f"{field}: $schema {schema['$schema']!r} is not a JSON Schema draft", field=field)
    walked: set[str] = set()
    todo = [""]
    while todo:
        for location, sub in _subschemas(schema, todo.pop()):
            if location in walked:
                continue
            walked.add(location)
            if location and "$id" in sub:
                fail(
                    f"{field}: $id at {location!r}: only the schema's root may carry an $id",
                    field=field,
                )
            for keyword in REF_KEYWORDS:
                if keyword in sub:
                    target = _target(schema, sub[keyword], field)
                    if target not in walked:
                        todo.append(target)
    _check_loops(schema, walked, field)


def _fail_ref(field: str, ref, why: str):
    fail(f"{field}: $ref {ref!r} {why}", field=field, schema_ref=str(ref)[:500])


def _target(schema: dict, ref, field: str) -> str:
    """The JSON pointer (within `schema`) a local reference names."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        _fail_ref(
            field,
            ref,
            "points outside the definition: references resolve only inside the schema "
            '("#" or "#/$defs/…"); nothing is ever retrieved',
        )
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        _fail_ref(field, ref, 'names an anchor: use a JSON pointer such as "#/$defs/item"')
    if not pointers.is_valid(fragment):
        _fail_ref(field, ref, "is not a JSON pointer")
    found = pointers.get(schema, fragment)
    if found is pointers.MISSING:
        _fail_ref(field, ref, "points to nothing in the schema")
    if not isinstance(found, dict | bool):
        _fail_ref(field, ref, "points to something that is not a schema")
    return fragment


def _subschemas(schema: dict, start: str):
    """(location, subschema) of every schema object under `start`, by keyword."""
    stack = [start]
    while stack:
        location = stack.pop()
        sub = pointers.get(schema, location)
        if not isinstance(sub, dict):
            continue
        yield location, sub
        for keyword, child in sub.items():
            at = f"{location}/{_escape(keyword)}"
            if keyword in (*IN_PLACE_ONE, *DEEPER_ONE) and isinstance(child, dict):
                stack.append(at)
            if keyword in (*IN_PLACE_MANY, *DEEPER_MANY) and isinstance(child, list):
                stack.extend(f"{at}/{i}" for i in range(len(child)))
            if keyword in SCHEMA_MAPS and isinstance(child, dict):
                stack.extend(f"{at}/{_escape(k)}" for k in child)


def _in_place(schema: dict, location: str) -> list[tuple[str, str | None]]:
    """(location, the ref that leads there or None) of what applies to the same instance as
    the subschema at `location`."""
    sub = pointers.get(schema, location)
    if not isinstance(sub, dict):
        return []
    found = [(f"{location}/{k}", None) for k in IN_PLACE_ONE if isinstance(sub.get(k), dict)]
    for keyword in IN_PLACE_MANY:
        if isinstance(sub.get(keyword), list):
            found += [(f"{location}/{keyword}/{i}", None) for i in range(len(sub[keyword]))]
    if isinstance(sub.get("dependentSchemas"), dict):
        found += [
            (f"{location}/dependentSchemas/{_escape(k)}", None) for k in sub["dependentSchemas"]
        ]
    for keyword in REF_KEYWORDS:
        if isinstance(sub.get(keyword), str):
            found.append((unquote(sub[keyword][1:]), sub[keyword]))
    return found


def _check_loops(schema: dict, locations: set[str], field: str) -> None:
    """A depth-first walk over same-instance edges; an edge back onto the current path is a
    loop that validation would follow forever (every such loop passes through a ref)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in sorted(locations):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(_in_place(schema, root)), None)]  # (location, edges, entered by)
        while stack:
            location, edges, _ = stack[-1]
            edge = next(edges, None)
            if edge is None:
                state[location] = 2
                stack.pop()
                continue
            target, ref = edge
            if state.get(target) == 1:
                on_loop = [e for loc, _, e in stack if loc != target][::-1]
                first = next((r for r in [ref, *on_loop] if r is not None), "#" + target)
                _fail_ref(field, first, "loops back to itself without consuming input")
            if target not in state:
                state[target] = 1
                stack.append((target, iter(_in_place(schema, target)), ref))


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")

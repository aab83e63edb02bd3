"""JSON pointers (RFC 6901) over plain JSON values: parse, read, and write with parents created.

Written here rather than taken from the `jsonpointer` package because graph mappings need
"write, creating missing objects on the way" and "absent" as a value distinct from null, which
that package does not offer; the grammar itself is ten lines.
"""

import copy

MISSING = object()  # what `get` returns for a path that does not exist


class PointerError(ValueError):
    pass


def parse(pointer: str) -> list[str]:
    if not isinstance(pointer, str):
        raise PointerError(f"a JSON pointer must be a string, got {pointer!r}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PointerError(f"JSON pointer {pointer!r} must be empty or start with '/'")
    parts = pointer[1:].split("/")
    for part in parts:
        if "~" in part.replace("~0", "").replace("~1", ""):
            raise PointerError(f"JSON pointer {pointer!r} has a bad '~' escape")
    return [p.replace("~1", "/").replace("~0", "~") for p in parts]


def is_valid(pointer) -> bool:
    try:
        parse(pointer)
    except PointerError:
        return False
    return True


def get(document, pointer: str, default=MISSING):
    current = document
    for part in parse(pointer):
        if isinstance(current, dict):
            if part not in current:
                return default
            current = current[part]
        elif isinstance(current, list):
            if not part.isdigit() or int(part) >= len(current):
                return default
            current = current[int(part)]
        else:
            return default
    return current


def set(document: dict, pointer: str, value) -> dict:  # noqa: A001 - the RFC's verb
    """Write (a copy of) `value` at `pointer` inside `document` (mutated and returned). Missing
    objects on the way are created; "" is refused (the whole document is never replaced).

    Every object and array on the way is replaced by a shallow copy before it changes, so a
    write never changes a value another document shares: a fan-out's branch contexts share the
    parent context's values instead of each holding a deep copy of it."""
    parts = parse(pointer)
    if not parts:
        raise PointerError("cannot write to the empty pointer (the whole document)")
    current = document
    for part in parts[:-1]:
        if isinstance(current, list):
            if not part.isdigit() or int(part) >= len(current):
                raise PointerError(f"{pointer!r}: index {part!r} is outside the array")
            child = current[int(part)]
            if isinstance(child, dict | list):
                child = current[int(part)] = child.copy()
            current = child  # a scalar: the next part refuses it
            continue
        if not isinstance(current, dict):
            raise PointerError(f"{pointer!r}: {part!r} is inside a non-object value")
        child = current.get(part)
        current[part] = child.copy() if isinstance(child, dict | list) else {}
        current = current[part]
    last = parts[-1]
    if isinstance(current, list):
        if last == "-":
            current.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) < len(current):
            current[int(last)] = copy.deepcopy(value)
        else:
            raise PointerError(f"{pointer!r}: index {last!r} is outside the array")
    elif isinstance(current, dict):
        current[last] = copy.deepcopy(value)
    else:
        raise PointerError(f"{pointer!r}: cannot write inside a non-object value")
    return document


def first_segment(pointer: str) -> str | None:
    parts = parse(pointer)
    return parts[0] if parts else None

"""Concurrency caps: which slot group a task of a capped workflow belongs to, and its cap.

`@workflow(concurrency=N)` lets at most N instances of the workflow run at once;
`concurrency_key="user_id"` makes that N per value of params["user_id"]. "Running" means the
instance's task is leased by a runner: waiting, paused and finished instances hold no slot, and
instances over the cap stay `active` (queued) until a slot frees. The group and the cap are
copied onto the task row whenever it is written, so the claim can count and filter in SQL
(workflows.engine.claim); a changed cap applies to tasks written after the deploy.
"""

import json

from workflows.authoring import registry

GROUP_MAX = 200
KEY_SEPARATOR = "/"


def key_value(params, key: str) -> str:
    """The params value that names the slot group ("" when absent); strings as they are."""
    value = params.get(key) if isinstance(params, dict) else None
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def task_fields(workflow_name: str, version: int, params) -> dict:
    """{"concurrency_group", "concurrency_limit"} for a task of this instance."""
    definition = registry.get(workflow_name, version) or registry.latest(workflow_name)
    if definition is None or definition.concurrency is None:
        return {"concurrency_group": "", "concurrency_limit": None}
    group = workflow_name
    if definition.concurrency_key:
        group += KEY_SEPARATOR + key_value(params, definition.concurrency_key)
    return {"concurrency_group": group[:GROUP_MAX], "concurrency_limit": definition.concurrency}


_capped_at: tuple[int, bool] | None = None  # (registry generation, answer)


def any_capped() -> bool:
    """Whether this deployment's code caps any workflow (else the claim skips the slot count).
    Asked before every claim, so the answer is kept until the registry changes."""
    global _capped_at
    generation = registry.generation
    if _capped_at is None or _capped_at[0] != generation:
        capped = any(
            registry.get(name, version).concurrency is not None
            for name in registry.names()
            for version in registry.versions(name)
        )
        _capped_at = (generation, capped)
    return _capped_at[1]


def split_group(group: str) -> tuple[str, str | None]:
    """(workflow name, key value or None) of a slot group, for the console."""
    name, sep, key = group.partition(KEY_SEPARATOR)
    return name, (key if sep else None)

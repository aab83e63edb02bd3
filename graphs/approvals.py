"""Pure rules for answering a human node: which API scopes answer a binding's nodes, the
four-eyes rule, and what an answer decided. graphs/answers.py applies them (no database here)."""

APPROVE_SCOPE = "graphs:approve"  # every binding; "graphs:approve:<binding>" one binding
ALL_SCOPES = "*"
# The Django permission (GraphBinding Meta) that answers every binding's human nodes.
ANY_BINDING_PERMISSION = "graphs.answer_any_human_node"
SYSTEM = "system"  # code acting without a request: no person, so four-eyes cannot apply


def binding_scope(binding: str) -> str:
    return f"{APPROVE_SCOPE}:{binding}"


def scopes_answer(scopes, binding: str) -> bool:
    """An API key with `scopes` may answer the human nodes of runs of `binding`."""
    scopes = set(scopes or ())
    return bool(
        ALL_SCOPES in scopes
        or APPROVE_SCOPE in scopes
        or (binding and binding_scope(binding) in scopes)
    )


def scopes_answer_some(scopes) -> bool:
    """An API key with `scopes` may answer the human nodes of at least one binding."""
    scopes = set(scopes or ())
    return bool(
        scopes & {ALL_SCOPES, APPROVE_SCOPE}
        or any(s.startswith(APPROVE_SCOPE + ":") for s in scopes)
    )


def four_eyes_refuses(*, four_eyes: bool, started_by: str, answered_by: str) -> bool:
    """Under four-eyes the principal that started a run may not answer it. A run started by
    the system (a lab upload), or before starters were recorded (""), has no such person."""
    return bool(four_eyes and started_by not in ("", SYSTEM) and started_by == answered_by)


def decision(payload) -> str:
    """What an answer decided, as its 409s and the console name it: the console's payload
    carries {"approved": bool}; any other payload is just an answer."""
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        return "approve" if payload["approved"] else "reject"
    return "answer"

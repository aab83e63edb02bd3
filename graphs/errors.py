"""Graph refusals: each an ApiError with a stable code, rendered as {"code", "message", ...}."""

from ops.errors import ApiError, ErrorCode


class GraphError(ApiError):
    code = "graph_error"
    status = 400

    def __init__(self, message: str, **extra):
        super().__init__(self.status, self.code, message, **extra)


class InvalidGraph(GraphError):
    """The definition breaks the vocabulary; `ref` names the offending node or transition
    (`schema_ref`: the offending $ref of a JSON Schema)."""

    code = "invalid_graph"
    status = 400

    def __init__(self, message: str, *, ref: str | None = None, field: str | None = None, **extra):
        extra = {"ref": ref, **extra}
        if field is not None:
            extra["field"] = field
        super().__init__(message, **extra)


class DefinitionNotFound(GraphError):
    code = "definition_not_found"
    status = 404


class DefinitionPublished(GraphError):
    code = "definition_published"
    status = 409


class BindingNotFound(GraphError):
    code = "binding_not_found"
    status = 404


class BindingExists(GraphError):
    code = "binding_exists"
    status = 409


class BindingDisabled(GraphError):
    """The binding is disabled: it starts no new runs (running ones go on)."""

    code = "disabled"
    status = 409


class NoPublishedVersion(GraphError):
    code = "no_published_version"
    status = 409


class InvalidInput(GraphError):
    code = "invalid_input"
    status = 400


class RunNotFound(GraphError):
    code = "run_not_found"
    status = 404


class NoWaitingHuman(GraphError):
    """An answer names a token that is not a human node waiting for that event type."""

    code = "no_waiting_human"
    status = 409


class EventNotTargetable(GraphError):
    """The run's interpreter version takes human answers by event type only."""

    code = "event_not_targetable"
    status = 409


class NotAnApprover(GraphError):
    """The caller is not among those the run's binding lets answer its human nodes."""

    code = ErrorCode.PERMISSION_DENIED
    status = 403


class FourEyes(GraphError):
    """The definition says four-eyes and the caller started the run."""

    code = "four_eyes"
    status = 403


class AlreadyAnswered(GraphError):
    """The human node took an answer already; `answer` names it (token, node, by, at,
    decision)."""

    code = "already_answered"
    status = 409


class GroupNotFound(GraphError):
    code = "group_not_found"
    status = 400


class HttpActionRefused(Exception):
    """The http action's SSRF guard refused a destination (never retried)."""


class RateLimited(Exception):  # noqa: N818 - the name a failure route's condition reads
    """The http action got a 429 it did not wait out (retried by the node's backoff)."""

"""Who may call which workflow route: an operator key with the operation's scope (or a staff
session), then the deployment's optional policy functions.

Scopes: workflows:read, workflows:create, workflows:manage (pause/resume/terminate/restart,
activate), workflows:events, workflows:tick. Missing credentials → 401
`authentication_required`; a key without the scope → 403 `permission_denied`.

Policies (setting WORKFLOWS_POLICIES, read at call time so tests and deploys can change it):

    WORKFLOWS_POLICIES = {
        "create": "myapp.policies.no_creates_during_freeze",
        "manage": ["myapp.policies.oncall_only", "myapp.policies.not_on_friday"],
    }

Each function is called as `fn(request, *, operation, workflow_name, instance_id)` after the
scope check. It denies by raising ops.errors.ApiError (its status and code are sent as is) or
by returning False (403 `permission_denied`); anything else allows.
"""

from django.conf import settings
from django.utils.module_loading import import_string
from rest_framework import exceptions, permissions

from ops.auth import has_scope
from ops.errors import ApiError, ErrorCode

OPERATIONS = ("read", "create", "manage", "events", "tick")


def policies_for(operation: str) -> list:
    configured = getattr(settings, "WORKFLOWS_POLICIES", {}) or {}
    paths = configured.get(operation) or []
    if isinstance(paths, str):
        paths = [paths]
    return [p if callable(p) else import_string(p) for p in paths]


def policy_check(request, *, operation: str, workflow_name=None, instance_id=None) -> None:
    """Run the configured policies; raise ApiError when one denies. Shared with the console."""
    for policy in policies_for(operation):
        verdict = policy(
            request, operation=operation, workflow_name=workflow_name, instance_id=instance_id
        )
        if verdict is False:
            raise ApiError(
                403,
                ErrorCode.PERMISSION_DENIED,
                f"A workflows policy denied this {operation} request.",
                policy=f"{policy.__module__}.{policy.__qualname__}",
            )


def workflows_permission(operation: str) -> type[permissions.BasePermission]:
    """Permission class for one operation: scope `workflows:<operation>`, then policies."""
    if operation not in OPERATIONS:
        raise ValueError(f"unknown workflows operation {operation!r}")
    scope = f"workflows:{operation}"

    class WorkflowsPermission(permissions.BasePermission):
        message = f"This needs an API key with the {scope!r} scope or a staff session."

        def has_permission(self, request, view):
            if not (request.user and request.user.is_authenticated):
                raise exceptions.NotAuthenticated("Send X-Admin-Key or sign in as staff.")
            if not has_scope(request, scope):
                return False
            policy_check(
                request,
                operation=operation,
                workflow_name=view.kwargs.get("name"),
                instance_id=view.kwargs.get("instance_id"),
            )
            return True

    WorkflowsPermission.__name__ = f"WorkflowsPermission[{scope}]"
    return WorkflowsPermission

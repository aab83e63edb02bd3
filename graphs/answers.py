"""Answers to waiting human nodes (POST /v1/graphs/runs/{id}/events, the console's
Approve/Reject): who may answer (graphs.approvals), one accepted answer per waiting node (the
graph_answer row's unique constraint), and that row, its engine event and its audit row in one
transaction. Refusals are audited, at a bounded rate (ops.services.audit_log_write_limited)."""

from dataclasses import dataclass

from django.db import IntegrityError, transaction

from graphs import approvals, selectors, spec
from graphs.errors import (
    AlreadyAnswered,
    EventNotTargetable,
    FourEyes,
    GraphError,
    NotAnApprover,
    NoWaitingHuman,
)
from graphs.models import GraphAnswer, GraphBinding, GraphRun
from ops.models import ApiKey
from ops.services import actor_for, audit_log_write, audit_log_write_limited
from workflows import runtime
from workflows import services as engine

TARGETED_VERSION = 3  # graph-run versions from this one take answers naming a token


@dataclass(frozen=True)
class Answerer:
    """Who answers: `actor` as audit rows name it, with an API key's `scopes` or a signed-in
    `user`; neither is code acting on its own (the system), which may answer anything."""

    actor: str
    scopes: tuple | None = None
    user: object = None

    @property
    def system(self) -> bool:
        return self.scopes is None and self.user is None


def answerer_for(*, request=None, actor: str | None = None) -> Answerer:
    if request is None:
        return Answerer(actor=actor or approvals.SYSTEM)
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return Answerer(actor=actor_for(request), scopes=tuple(auth.scopes))
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "pk", None) is not None:
        return Answerer(actor=actor_for(request), user=user)
    return Answerer(actor=actor_for(request), scopes=())  # no credentials: answers nothing


def who_may_answer(binding_name: str, binding: GraphBinding | None) -> str:
    """The binding's approvers in words, for refusals and the console."""
    group = binding.approvers.name if binding is not None and binding.approvers_id else None
    people = f"members of group {group!r} (staff), " if group else ""
    return (
        f"{people}staff with the {approvals.ANY_BINDING_PERMISSION} permission, and API keys "
        f"with {approvals.APPROVE_SCOPE} or {approvals.binding_scope(binding_name or '<binding>')}"
    )


def _user_answers(user, binding: GraphBinding | None) -> bool:
    if not (user.is_active and user.is_staff):
        return False
    if user.has_perm(approvals.ANY_BINDING_PERMISSION):  # superusers hold every permission
        return True
    return bool(
        binding is not None
        and binding.approvers_id is not None
        and user.groups.filter(pk=binding.approvers_id).exists()
    )


def _answers_some(answerer: Answerer) -> bool:
    if answerer.scopes is not None:
        return approvals.scopes_answer_some(answerer.scopes)
    return answerer.system or bool(answerer.user.is_active and answerer.user.is_staff)


def refusal(answerer: Answerer, run: GraphRun) -> GraphError | None:
    """Why `answerer` may not answer the human nodes of `run` (NotAnApprover, FourEyes), or
    None when they may. The console asks it to decide whether to show Approve/Reject."""
    if not answerer.system:
        if answerer.scopes is not None:
            allowed = approvals.scopes_answer(answerer.scopes, run.binding_name)
        else:
            allowed = _user_answers(answerer.user, run.binding)
        if not allowed:
            return NotAnApprover(
                f"the human nodes of binding {run.binding_name!r} are answered by "
                + who_may_answer(run.binding_name, run.binding)
            )
    if approvals.four_eyes_refuses(
        four_eyes=run.definition.document.get("four_eyes") is True,
        started_by=run.started_by,
        answered_by=answerer.actor,
    ):
        return FourEyes(
            f"run {run.run_id!r} was started by {run.started_by} and its definition says "
            "four-eyes: someone else must answer it"
        )
    return None


def _deny(error: GraphError, answerer: Answerer, *, request, run_id: str, metadata: dict):
    """Audit the refusal with what only this service knows, then raise it (marked audited:
    the API's exception handler writes no second, generic row)."""
    error.audited = True
    audit_log_write_limited(
        action="graph_run.answer_denied",
        request=request,
        actor=answerer.actor,
        resource=f"graph_run:{run_id}",
        result=error.code,
        metadata=metadata,
    )
    raise error


def run_answer(
    *,
    run_id: str,
    type: str,  # noqa: A002
    payload=None,
    token: str | None = None,
    actor: str | None = None,
    request=None,
) -> GraphAnswer:
    """Answer the run's human node waiting for `type` — the one at `token` (graph-run v3+),
    else the first waiting one (token order) — on behalf of `request`'s principal (or `actor`;
    neither: the system). 403 NotAnApprover / FourEyes (audited), 409 AlreadyAnswered naming
    the accepted answer, 409 NoWaitingHuman / EventNotTargetable."""
    from graphs.services import run_get

    answerer = answerer_for(request=request, actor=actor)
    asked = {"type": type, **({"token": token} if token is not None else {})}
    if not _answers_some(answerer):
        # Refused before the run is looked up: who answers nothing learns nothing of runs.
        _deny(
            NotAnApprover(
                f"answering human nodes needs an API key with the {approvals.APPROVE_SCOPE} "
                f"(or {approvals.APPROVE_SCOPE}:<binding>) scope, or a staff session"
            ),
            answerer,
            request=request,
            run_id=run_id,
            metadata=asked,
        )
    run = run_get(run_id=run_id)
    refused = refusal(answerer, run)
    if refused is not None:
        _deny(
            refused,
            answerer,
            request=request,
            run_id=run.run_id,
            metadata={**asked, "binding": run.binding_name},
        )
    return _accept(run, answerer, event_type=type, payload=payload, token=token, request=request)


def _slots(run: GraphRun, event_type: str, token: str | None, accepted: dict) -> list[str]:
    """The token paths this answer may take, in order; refusals when there is none."""
    if token is not None and run.instance.version < TARGETED_VERSION:
        raise EventNotTargetable(
            f"run {run.run_id!r} runs on graph-run v{run.instance.version}, whose human nodes "
            "take answers by event type only: send it without a token"
        )
    if token is not None and token in accepted:
        raise already_answered(accepted[token])
    waiting = selectors.waiting_human_tokens(run, event_type=event_type)
    if token is not None:
        if token not in waiting:
            raise NoWaitingHuman(
                f"token {token!r} of run {run.run_id!r} is not a human node waiting for "
                f"{event_type!r}"
            )
        return [token]
    free = [path for path in waiting if path not in accepted]
    if free:
        return free
    answered = [a for a in accepted.values() if a.event_type == event_type]
    if answered:
        raise already_answered(max(answered, key=lambda a: a.pk))
    raise NoWaitingHuman(f"no human node of run {run.run_id!r} is waiting for {event_type!r}")


def already_answered(answer: GraphAnswer) -> AlreadyAnswered:
    body = selectors.answer_body(answer)
    return AlreadyAnswered(
        f"token {answer.token_path!r} ({answer.node_ref}) was answered by {answer.actor} at "
        f"{body['at']}: {answer.decision}",
        answer=body,
    )


def _accept(run, answerer, *, event_type, payload, token, request) -> GraphAnswer:
    engine_run = run.instance.run_number
    accepted = selectors.accepted_answers(run)
    candidates = _slots(run, event_type, token, accepted)
    nodes = dict(
        selectors.current_tokens(run)
        .filter(path_id__in=candidates)
        .values_list("path_id", "node_ref")
    )
    decision = approvals.decision(payload)
    with transaction.atomic():
        answer = None
        for path in candidates:  # untargeted: the next waiting node when one is taken meanwhile
            try:
                with transaction.atomic():  # savepoint: the insert may hit graph_answer_once
                    answer = GraphAnswer.objects.create(
                        run=run,
                        engine_run=engine_run,
                        token_path=path,
                        node_ref=nodes.get(path, ""),
                        event_type=event_type,
                        decision=decision,
                        actor=answerer.actor,
                        created_at=runtime.now(),
                    )
                break
            except IntegrityError:
                continue
        if answer is None:
            taken = run.answers.filter(engine_run=engine_run, token_path=candidates[0]).first()
            if taken is None:  # its transaction rolled back after all: the node still waits
                raise NoWaitingHuman(f"token {candidates[0]!r} was being answered; retry")
            raise already_answered(taken)
        # v3 human nodes also wait for their token's own type, so the engine hands this answer
        # to exactly the node recorded above; v1/v2 nodes take it by type, first waiting first.
        targeted = run.instance.version >= TARGETED_VERSION
        engine.instance_send_event(
            instance=run.instance,
            type=spec.token_event_type(event_type, answer.token_path) if targeted else event_type,
            payload=payload,
        )
        audit_log_write(
            action="graph_run.send_event",
            resource=f"graph_run:{run.run_id}",
            actor=answerer.actor,
            request=request,
            metadata={
                "type": event_type,
                "token": answer.token_path,
                "node": answer.node_ref,
                "decision": decision,
            },
            idempotency_key=getattr(request, "idempotency_key", "") or "",
        )
    return answer

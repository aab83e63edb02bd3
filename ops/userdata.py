"""What is stored about a user, wherever it lives: the registry that the wipe and the export both
walk. Apps fill it in AppConfig.ready(); ops knows nothing of what they store.

- `UserData` sources: the rows that carry one user's data (by a user column, or found through
  identifiers: a delivery named by a Terra user id), their stored files and byte attachments;
- identifier providers: strings that name the user or their records elsewhere (username, Terra
  user ids, upload ids), gathered once into a `Subject` before anything is deleted;
- stoppers: called first by a wipe to stop the user's live work (terminate instances and runs);
- mentions: text and JSON columns of operator history (audit rows, admin log) that may name a
  user; a wipe replaces each identifier there, keeping the row.

docs/health-data.md tells how the wipe and the export use them.
"""

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast

USERNAME = "username"  # the identifier kind every subject has


@dataclass(frozen=True)
class Subject:
    """One user and every identifier that names them or their records, gathered before a wipe
    or an export reads anything (a wipe must still find raw events by a Terra user id after the
    connection naming it is gone)."""

    user: Any
    pk: int  # kept: the user's own pk is None once it is deleted
    identifiers: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def ids(self, kind: str) -> frozenset[str]:
        return self.identifiers.get(kind, frozenset())

    def all_identifiers(self) -> set[str]:
        return {value for values in self.identifiers.values() for value in values if value}


# A byte stream of a row for the export: (name inside the source's folder, chunks).
Attachment = tuple[str, Callable[[], Iterable[bytes]]]


@dataclass(frozen=True)
class UserData:
    """Rows that carry one user's data.

    `rows(subject)` is a queryset of them. The wipe deletes them in registration order (so
    register children before their parents, or name `before=` when registering); the export
    writes each row as a JSON line of its columns but `omit`. `stored_files(row)` names storage
    keys the wipe deletes after it commits and the export copies; `attachments(row)` names other
    byte streams the export writes (a delivery's exact body)."""

    key: str
    model: type[models.Model]
    rows: Callable[[Subject], models.QuerySet]
    wipe: bool = True
    export: bool = True
    stored_files: Callable[[Any], Iterable[str]] | None = None
    attachments: Callable[[Any], Iterable[Attachment]] | None = None
    omit: tuple[str, ...] = ()


_sources: list[UserData] = []
_identifiers: list[Callable[[Any], Mapping[str, Iterable[str]]]] = []
_stoppers: dict[str, Callable[[Subject], int]] = {}
_mentions: list[tuple[str, tuple[str, ...]]] = []


def user_data_register(source: UserData, *, before: str | None = None) -> None:
    """Add (or replace, by key) a source; `before`: the key of a source it must be wiped before."""
    for existing in [s for s in _sources if s.key == source.key]:
        _sources.remove(existing)
    at = next((i for i, s in enumerate(_sources) if s.key == before), len(_sources))
    _sources.insert(at, source)


def user_data_sources() -> list[UserData]:
    return list(_sources)


def identifiers_register(provider: Callable[[Any], Mapping[str, Iterable[str]]]) -> None:
    """`provider(user)` → {kind: identifiers}, e.g. {"terra_user_id": [...]}."""
    if provider not in _identifiers:
        _identifiers.append(provider)


def subject_of(user) -> Subject:
    found: dict[str, set[str]] = {USERNAME: {user.get_username()}}
    for provider in _identifiers:
        for kind, values in provider(user).items():
            found.setdefault(kind, set()).update(str(v) for v in values if v)
    return Subject(user=user, pk=user.pk, identifiers={k: frozenset(v) for k, v in found.items()})


def subject_user(username: str | None):
    """The user an API or command `subject` (a username) names, None for none; an unknown name
    is 400 unknown_subject."""
    from django.contrib.auth import get_user_model

    from ops.errors import ApiError, ErrorCode

    if username is None or username == "":
        return None
    model = get_user_model()
    found = model.objects.filter(**{model.USERNAME_FIELD: username}).first()
    if found is None:
        raise ApiError(400, ErrorCode.UNKNOWN_SUBJECT, f"no user {username!r} to be the subject")
    return found


def stopper_register(name: str, stop: Callable[[Subject], int]) -> None:
    """`stop(subject)` → how many live things of the user it stopped; a wipe calls it first, in
    its transaction, before any row is deleted (a workflow engine terminates the user's
    instances this way)."""
    _stoppers[name] = stop


def user_data_stop(subject: Subject) -> dict[str, int]:
    return {name: stop(subject) for name, stop in _stoppers.items()}


def mentions_register(model_label: str, fields: Iterable[str]) -> None:
    """Text or JSON columns of `app_label.Model` that may name a user among other things."""
    _mentions.append((model_label, tuple(fields)))


ERASED = "[erased]"


def _replacer(subject: Subject) -> Callable[[str], str]:
    """The username, where it stands as a whole word of username characters, becomes
    user#<id> (a username "al" leaves "also" alone); any other identifier (a Terra user id, an
    upload id: long and random) becomes [erased] wherever it appears ("lab-<upload id>")."""
    username = subject.user.get_username()
    others = sorted(subject.all_identifiers() - {username}, key=len, reverse=True)
    name = re.compile(r"(?<![\w.@+-])" + re.escape(username) + r"(?![\w.@+-])")
    other = re.compile("|".join(re.escape(v) for v in others)) if others else None

    def replace(text: str) -> str:
        if other is not None:
            text = other.sub(ERASED, text)
        return name.sub(f"user#{subject.pk}", text)

    return replace


def _redacted(value, replace: Callable[[str], str]):
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, list):
        return [_redacted(v, replace) for v in value]
    if isinstance(value, dict):
        return {replace(k): _redacted(v, replace) for k, v in value.items()}
    return value


def mentions_redact(*, subject: Subject) -> int:
    """Replace every identifier of `subject` in the registered columns; returns rows changed."""
    from django.apps import apps

    replace = _replacer(subject)
    values = subject.all_identifiers()
    if not values:
        return 0
    changed = 0
    for label, fields in _mentions:
        try:
            model = apps.get_model(label)
        except LookupError:
            continue
        match = Q()
        for name in fields:
            column = model._meta.get_field(name)
            target = name
            if isinstance(column, models.JSONField):
                target = f"_text_{name}"
            for value in values:
                match |= Q(**{f"{target}__contains": value})
        annotations = {
            f"_text_{n}": Cast(n, models.TextField())
            for n in fields
            if isinstance(model._meta.get_field(n), models.JSONField)
        }
        rows = model.objects.annotate(**annotations).filter(match).only("pk", *fields)
        for row in rows.iterator(chunk_size=500):
            updates = {}
            for name in fields:
                before = getattr(row, name)
                after = _redacted(before, replace)
                if after != before:
                    updates[name] = after
            if updates:
                model.objects.filter(pk=row.pk).update(**updates)
                changed += 1
    return changed

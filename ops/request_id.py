"""The current request id, shared with log lines, queue messages, traces and workflow logs."""

import contextvars
import logging
import re
import uuid
from contextlib import contextmanager

_current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# What the current unit of work is about (raw_event_id, workflow ids): added to log records.
_fields: contextvars.ContextVar[tuple] = contextvars.ContextVar("log_fields", default=())
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def new_request_id() -> str:
    return uuid.uuid4().hex


def accept_request_id(raw: str | None) -> str:
    """A client's X-Request-ID is kept when it is short and plain; otherwise mint one."""
    if raw and _VALID.match(raw):
        return raw
    return new_request_id()


def get_request_id() -> str:
    return _current.get()


def set_request_id(value: str) -> contextvars.Token:
    return _current.set(value)


def reset_request_id(token: contextvars.Token) -> None:
    _current.reset(token)


def log_fields_set(**fields) -> contextvars.Token:
    """Log lines from here on carry these fields (LOG_FORMAT=json shows them as keys) until
    log_fields_reset(token)."""
    return _fields.set((*_fields.get(), *fields.items()))


def log_fields_reset(token: contextvars.Token) -> None:
    _fields.reset(token)


@contextmanager
def log_context(**fields):
    """log_fields_set for a block."""
    token = log_fields_set(**fields)
    try:
        yield
    finally:
        log_fields_reset(token)


class RequestIdLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _current.get()
        for name, value in _fields.get():
            setattr(record, name, value)
        return True

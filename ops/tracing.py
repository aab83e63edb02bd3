"""Optional OpenTelemetry spans (the `otel` extra: pip install 'vitalflow[otel]').

When `opentelemetry-api` is importable and the application configured a TracerProvider (an
SDK), `span()` opens a span on the tracer "vitalflow"; with the API alone there is nothing to
record and `span()` yields None, as without the package (nothing is imported then). Every
helper takes None, so callers never check. The only probe is one `find_spec` per process.

Spans (names and attributes are the contract operators build dashboards on):
- `workflow.run` (workflows.engine.run_one): workflow, instance id, run number, version, outcome.
- `workflow.step` (workflows.engine.execute): step name, type, attempt, outcome, wait kind.
- `terra.webhook` (ingest.webhook): request id, raw event id, event type, duplicate.
- `ingest.consume` (ingest.consumer): one per raw event handled, with its request id and a link
  to the webhook span when the queue message carried its `traceparent`.
"""

import importlib.util
import os
from contextlib import contextmanager, nullcontext

_UNSET = object()
_api = _UNSET  # the opentelemetry modules once looked up, or None when not installed
_ENV_PROVIDER = "OTEL_PYTHON_TRACER_PROVIDER"  # the API's own setting: a provider by name
_provider_named_by_env = False  # read once, with the modules


def _otel():
    global _api, _provider_named_by_env
    if _api is _UNSET:
        try:
            found = importlib.util.find_spec("opentelemetry.trace") is not None
        except ModuleNotFoundError:  # no opentelemetry package at all
            found = False
        if not found:
            _api = None
        else:
            from opentelemetry import propagate, trace

            _api = (trace, propagate)
            _provider_named_by_env = _ENV_PROVIDER in os.environ
    return _api


def enabled() -> bool:
    """Whether spans would record: the API is installed and a real TracerProvider is set."""
    return _recording() is not None


def _recording():
    """The API modules when an application configured a TracerProvider, else None. The API's
    default provider answers non-recording spans that export nothing yet cost tens of
    microseconds each (context attach and detach); the runner opens several per run."""
    api = _otel()
    if api is None:
        return None
    trace = api[0]
    # While no provider is set, get_tracer_provider() looks its environment variable up on every
    # call (os.environ raises and catches a KeyError): about a microsecond and a half, eight
    # times a workflow run. The API keeps the provider it is given in _TRACER_PROVIDER, set once
    # and never unset; reading that is free, and if a release renames it the public call decides.
    if getattr(trace, "_TRACER_PROVIDER", _UNSET) is None and not _provider_named_by_env:
        return None
    if isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    ):
        return None
    return api


_NO_SPAN = nullcontext()  # reusable: `with` on it yields None


def span(name: str, attributes: dict | None = None, *, links=(), server: bool = False):
    """A span around the block (None without the extra). Exceptions are not recorded as errors
    by themselves: the engine unwinds suspended runs with an exception, so callers set the
    outcome attribute and, for real failures, `fail()`."""
    api = _recording()
    if api is None:
        return _NO_SPAN
    return _recorded_span(api, name, attributes, links, server)


@contextmanager
def _recorded_span(api, name: str, attributes: dict | None, links, server: bool):
    trace, _ = api
    tracer = trace.get_tracer("vitalflow")
    kind = trace.SpanKind.SERVER if server else trace.SpanKind.INTERNAL
    with tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=_clean(attributes),
        links=list(links),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        yield current


def current():
    """The current span (None without the extra)."""
    api = _otel()
    return None if api is None else api[0].get_current_span()


def set_attributes(target, attributes: dict) -> None:
    if target is not None:
        target.set_attributes(_clean(attributes))


def fail(target, exc: BaseException) -> None:
    """Mark the span failed (a step that raised, a consumer that crashed)."""
    if target is not None:
        trace, _ = _otel()
        target.record_exception(exc)
        target.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)[:200]))


def traceparent() -> str:
    """The current span as a W3C traceparent, to carry in a queue message ("" without one)."""
    api = _otel()
    if api is None:
        return ""
    carrier: dict[str, str] = {}
    api[1].inject(carrier)
    return carrier.get("traceparent", "")


def links_from(parent: str) -> list:
    """A link to the span a traceparent names (the webhook request a raw event came from)."""
    api = _otel()
    if api is None or not parent:
        return []
    trace, propagate = api
    context = trace.get_current_span(propagate.extract({"traceparent": parent})).get_span_context()
    return [trace.Link(context)] if context.is_valid else []


def _clean(attributes: dict | None) -> dict:
    """OpenTelemetry refuses None values; drop them."""
    return {k: v for k, v in (attributes or {}).items() if v is not None}

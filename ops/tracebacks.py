"""Bounded tracebacks for the console: the last few frames of an exception (file, line, function,
source line), capped in characters. Never a frame's local variables: they may hold health data."""

import traceback

MAX_FRAMES = 8
MAX_CHARS = 4000
MAX_CHAIN = 3  # exceptions followed through __cause__ / __context__


def bounded(exc: BaseException, *, frames: int = MAX_FRAMES, chars: int = MAX_CHARS) -> str:
    """The exception's last `frames` frames (and those of up to MAX_CHAIN causes), each as
    `File "…", line N, in f` plus its source line, ending with the exception's type name only:
    its message is stored beside the traceback already, and a message may quote a value.
    Longer than `chars`: the head is cut, since the frames nearest the raise matter most."""
    blocks = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(blocks) < MAX_CHAIN:
        seen.add(id(current))
        blocks.append(_block(current, frames))
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    text = "\n\nwhich was raised while handling:\n".join(blocks)
    if len(text) > chars:
        text = "…" + text[-(chars - 1) :]
    return text


def _block(exc: BaseException, frames: int) -> str:
    # extract_tb never captures locals (capture_locals defaults to False); lookup_lines reads
    # source lines of the code only.
    summary = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    shown = summary[-frames:] if frames > 0 else []
    lines = [f"Traceback (last {len(shown)} of {len(summary)} frames):"]
    for frame in shown:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()[:200]}")
    lines.append(_qualified_name(exc))
    return "\n".join(lines)


def _qualified_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return (
        cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"
    )

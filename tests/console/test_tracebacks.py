"""Bounded tracebacks (ops.tracebacks): the last frames only, capped in characters, the type
name but never the message or any variable's value."""

from ops import tracebacks


def _deep(n, secret):
    if n == 0:
        raise ValueError(f"bad reading {secret}")
    return _deep(n - 1, secret)


def caught(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the test wants any exception
        return exc
    raise AssertionError("did not raise")


def test_only_the_last_frames_are_kept():
    text = tracebacks.bounded(caught(_deep, 30, "x"), frames=5)
    assert text.startswith("Traceback (last 5 of 32 frames):")
    assert text.count('  File "') == 5
    assert text.endswith("ValueError")


def test_local_values_and_the_message_never_appear():
    text = tracebacks.bounded(caught(_deep, 3, "glucose=7.9"))
    assert "glucose" not in text  # neither the argument nor the message built from it
    assert "in _deep" in text and 'raise ValueError(f"bad reading {secret}")' in text


def test_the_text_is_capped_keeping_the_frames_nearest_the_raise():
    text = tracebacks.bounded(caught(_deep, 200, "x"), frames=200, chars=500)
    assert len(text) == 500 and text.startswith("…") and text.endswith("ValueError")


def test_causes_are_followed_a_few_levels():
    def wrapped():
        try:
            _deep(1, "x")
        except ValueError as exc:
            raise RuntimeError("wrapped") from exc

    text = tracebacks.bounded(caught(wrapped))
    assert "RuntimeError" in text and "which was raised while handling" in text
    assert text.rstrip().endswith("ValueError")


def test_an_exception_never_raised_has_no_frames():
    assert tracebacks.bounded(KeyError("k")) == "Traceback (last 0 of 0 frames):\nKeyError"

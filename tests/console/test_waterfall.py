"""The waterfall builder (workflows.waterfall) is pure: step records in, bars and SVG out."""

from datetime import UTC, datetime, timedelta

from workflows.waterfall import Retry, StepRecord, build, svg

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def kinds(chart):
    return [(bar.row, bar.kind) for bar in chart.bars]


def test_each_attempt_is_a_bar_with_its_backoff_between():
    step = StepRecord("call", "do", "complete", 3, at(0), completed_at=at(35))
    retries = {"call": [Retry(1, at(1), at(11)), Retry(2, at(12), at(32), "StepTimeout")]}
    chart = build([step], retries, now=at(40), in_flight=False)
    assert kinds(chart) == [
        (0, "failed"),
        (0, "backoff"),
        (0, "timeout"),
        (0, "backoff"),
        (0, "complete"),
    ]
    assert chart.bars[-1].start == at(32) and chart.bars[-1].end == at(35)
    assert chart.current_row is None


def test_a_step_waiting_for_its_retry_ends_on_a_pending_backoff():
    step = StepRecord("call", "do", "retrying", 1, at(0), next_retry_at=at(30))
    chart = build([step], {"call": [Retry(1, at(2), at(30))]}, now=at(10), in_flight=True)
    assert kinds(chart) == [(0, "failed"), (0, "backoff")]
    assert chart.bars[-1].open_ended and chart.current_row == 0


def test_sleeps_and_waits_are_bars_dashed_while_pending_and_now_is_marked():
    steps = [
        StepRecord("a", "do", "complete", 1, at(0), completed_at=at(1)),
        StepRecord("nap", "sleep", "complete", 0, at(1), completed_at=at(61), wake_at=at(61)),
        StepRecord("ok?", "wait_for_event", "waiting", 0, at(61), wake_at=at(3661)),
    ]
    chart = build(steps, {}, now=at(100), in_flight=True)
    assert kinds(chart) == [(0, "complete"), (1, "sleep"), (2, "wait")]
    assert chart.bars[2].open_ended and chart.current_row == 2
    drawing = svg(chart)
    assert drawing.count('class="vf-bar ') == 3
    assert 'class="vf-now"' in drawing and 'class="vf-current"' in drawing


def test_a_timed_out_wait_and_a_failed_step_are_told_apart():
    steps = [
        StepRecord("w", "wait_for_event", "timed_out", 0, at(0), completed_at=at(10)),
        StepRecord("x", "do", "errored", 1, at(10), at(11), error={"name": "KeyError"}),
    ]
    assert kinds(build(steps, {}, now=at(20), in_flight=False)) == [(0, "timeout"), (1, "failed")]


def test_names_and_errors_are_escaped():
    step = StepRecord("<script>", "do", "errored", 1, at(0), at(1), error={"name": "<b>"})
    drawing = svg(build([step], {}, now=at(2), in_flight=False))
    assert "<script>" not in drawing and "&lt;script&gt;" in drawing


def test_an_empty_run_says_so():
    assert "No steps in this run yet" in svg(build([], {}, now=T0, in_flight=True))


def test_a_thousand_steps_draw_a_thousand_bars():
    steps = [
        StepRecord(f"s{i}", "do", "complete", 1, at(i), completed_at=at(i + 0.5))
        for i in range(1000)
    ]
    assert svg(build(steps, {}, now=at(1000), in_flight=False)).count('class="vf-bar ') == 1000

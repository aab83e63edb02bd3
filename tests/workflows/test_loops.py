"""step.loop: iterations under name/~i/, state stored every commit_every iterations, replays
resume from the stored state, and only the last `keep` iterations' rows are kept."""

import pytest

from workflows.models import WorkflowStep


def _trace(path):
    return path.read_text().split() if path.exists() else []


def test_a_5000_iteration_loop_keeps_at_most_keep_times_steps_per_iteration_rows(harness):
    harness.create("loop-count", id="l1", params={"n": 5000, "keep": 10})
    assert harness.status("loop-count", "l1") == {
        "status": "complete",
        "output": sum(range(5000)),
    }
    rows = WorkflowStep.objects.filter(instance__instance_id="l1")
    iteration_rows = rows.filter(name__startswith="count/~")
    assert iteration_rows.count() <= 10 * 1
    assert rows.count() == iteration_rows.count() + 1  # + the loop's own row
    assert set(rows.values_list("name", flat=True)) >= {"count", "count/~4999/add"}


def test_the_loop_row_stores_the_state_every_commit_every_iterations(harness):
    harness.create("loop-count", id="l2", params={"n": 7, "commit_every": 3, "keep": 2})
    row = WorkflowStep.objects.get(instance__instance_id="l2", name="count")
    assert (row.type, row.status) == ("loop", "complete")
    assert row.result == {"value": 21, "iterations": 8}
    kept = sorted(
        WorkflowStep.objects.filter(
            instance__instance_id="l2", name__startswith="count/~"
        ).values_list("name", flat=True)
    )
    # Trimmed at commits (after iterations 3 and 6) down to the last 2 committed ones.
    assert kept == ["count/~4/add", "count/~5/add", "count/~6/add"]


def test_a_loop_that_sleeps_resumes_from_its_stored_state(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("loop-sleepy", id="l3", params={"trace": str(trace)})
    for _ in range(3):
        harness.advance("1 minute")
    assert harness.status("loop-sleepy", "l3") == {"status": "complete", "output": 3}
    assert _trace(trace) == ["iter0", "iter1", "iter2"]  # each iteration's step ran once
    names = set(
        WorkflowStep.objects.filter(instance__instance_id="l3").values_list("name", flat=True)
    )
    assert "ticks/~0/tick" not in names  # trimmed (keep=2)
    assert {"ticks/~2/tick", "ticks/~2/work"} <= names


def test_a_loop_whose_state_commits_rarely_replays_uncommitted_iterations_from_cache(
    harness, tmp_path
):
    trace = tmp_path / "trace"
    harness.create("loop-sleepy", id="l4", params={"trace": str(trace), "commit_every": 100})
    for _ in range(3):
        harness.advance("1 minute")
    assert harness.status("loop-sleepy", "l4") == {"status": "complete", "output": 3}
    assert _trace(trace) == ["iter0", "iter1", "iter2"]


def test_the_steps_per_run_limit_counts_only_retained_iterations(harness, settings):
    settings.WORKFLOWS_STEPS_PER_RUN_MAX = 50
    harness.create("loop-count", id="l5", params={"n": 200, "keep": 10})
    assert harness.status("loop-count", "l5")["status"] == "complete"


@pytest.mark.parametrize("options", [{"commit_every": 0}, {"keep": 0}, {"keep": "3"}])
def test_bad_loop_options_fail_with_invalid_step(harness, options):
    harness.create("loop-count", id="l6", params={"n": 2, **options})
    status = harness.status("loop-count", "l6")
    assert (status["status"], status["error"]["name"]) == ("errored", "InvalidStep")

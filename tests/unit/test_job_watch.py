"""JobWatcher: progress lines, when a job is over, which output to read, and its JSON state."""

from __future__ import annotations

import json

import pytest
from azure.batch import models as batch_models

from airflow_provider_azbatch.utils.job_watch import (
    JOB_STATE_CHECK_SECONDS,
    TERMINAL_JOB_STATES,
    JobWatcher,
    TaskCounts,
    WatchState,
    _streamed_filter,
    enum_value,
    format_progress,
    output_prefix,
)
from airflow_provider_azbatch.utils.log_tail import StreamCursor, TailResult

DONE = StreamCursor(10, "t1", done=True).to_json()


def _watcher(expected=None, streamed=(), **state) -> JobWatcher:
    return JobWatcher(WatchState("job-1", expected_tasks=expected, streamed=list(streamed), **state))


def _counts(active=0, running=0, completed=0, succeeded=0, failed=0) -> TaskCounts:
    return TaskCounts(active, running, completed, succeeded, failed)


# -- progress --------------------------------------------------------------------------------------


def test_progress_line_only_when_counts_change():
    watcher = _watcher(expected=3)

    first = watcher.observe_counts(_counts(active=3))
    same = watcher.observe_counts(_counts(active=3))
    moved = watcher.observe_counts(_counts(active=1, running=1, completed=1, succeeded=1))
    failed = watcher.observe_counts(_counts(completed=3, succeeded=2, failed=1))

    assert first == "Batch job job-1: 3 active, 0 running, 0 succeeded, 0 failed of 3"
    assert same is None
    assert moved == "Batch job job-1: 1 active, 1 running, 1 succeeded, 0 failed of 3"
    assert failed == "Batch job job-1: 0 active, 0 running, 2 succeeded, 1 failed of 3"
    assert watcher.state.counts == {"active": 0, "running": 0, "completed": 3, "succeeded": 2, "failed": 1}


def test_progress_line_without_expected_tasks():
    assert (
        _watcher().observe_counts(_counts(running=2)) == "Batch job job-1: 0 active, 2 running, 0 succeeded, 0 failed"
    )
    assert (
        format_progress("j", _counts(1, 2, 3, 4, 5), 0)
        == "Batch job j: 1 active, 2 running, 4 succeeded, 5 failed of 0"
    )


def test_completed_alone_moving_is_a_change():
    # completed is not shown, but it is part of the counts.
    watcher = _watcher()
    watcher.observe_counts(_counts(completed=1))

    assert watcher.observe_counts(_counts(completed=2)) == "Batch job job-1: 0 active, 0 running, 0 succeeded, 0 failed"


def test_counts_changed_since():
    watcher = _watcher()
    before = watcher.state.counts
    watcher.observe_counts(_counts(active=1))

    assert watcher.counts_changed_since(before) is True
    assert (
        watcher.counts_changed_since({"active": 1, "running": 0, "completed": 0, "succeeded": 0, "failed": 0}) is False
    )


def test_task_counts_from_the_sdk_model():
    result = batch_models.BatchTaskCountsResult(
        task_counts=batch_models.BatchTaskCounts(active=1, running=2, completed=7, succeeded=4, failed=3),
        task_slot_counts=batch_models.BatchTaskSlotCounts(active=1, running=2, completed=7, succeeded=4, failed=3),
    )

    counts = TaskCounts.from_sdk(result)

    assert counts == _counts(1, 2, 7, 4, 3)
    assert counts.to_json() == {"active": 1, "running": 2, "completed": 7, "succeeded": 4, "failed": 3}


# -- job state -------------------------------------------------------------------------------------


def test_job_check_due():
    watcher = _watcher()
    watcher.observe_job("active", None, now=1000.0)

    assert watcher.job_check_due(1000.0 + JOB_STATE_CHECK_SECONDS - 0.1, counts_moved=False) is False
    assert watcher.job_check_due(1000.0 + JOB_STATE_CHECK_SECONDS, counts_moved=False) is True
    assert watcher.job_check_due(1000.0, counts_moved=True) is True
    assert JOB_STATE_CHECK_SECONDS == 60.0


def test_observe_job():
    watcher = _watcher()
    watcher.observe_job("terminating", "MaxWallClockTimeExpiry", now=12.5)

    assert (watcher.state.job_state, watcher.state.terminate_reason, watcher.state.last_job_check) == (
        "terminating",
        "MaxWallClockTimeExpiry",
        12.5,
    )


@pytest.mark.parametrize(
    ("expected", "counts", "done"),
    [
        (2, None, False),
        (2, _counts(active=1, completed=1, succeeded=1), False),
        (2, _counts(running=1, completed=1, succeeded=1), False),
        (2, _counts(completed=1, succeeded=1), False),  # a task not counted yet
        (2, _counts(completed=2, succeeded=1, failed=1), True),
        (2, _counts(completed=3, succeeded=3), True),
        (None, _counts(completed=5, succeeded=5), True),
        (None, _counts(running=1, completed=5, succeeded=5), False),
    ],
)
def test_all_tasks_done(expected, counts, done):
    watcher = _watcher(expected=expected)
    if counts is not None:
        watcher.observe_counts(counts)

    assert watcher.all_tasks_done() is done
    assert watcher.job_over() is done


@pytest.mark.parametrize("job_state", ["completed", "terminating", "deleting"])
def test_job_over_when_the_job_ended_with_tasks_left(job_state):
    watcher = _watcher(expected=5)
    watcher.observe_counts(_counts(active=3, running=1, completed=1, succeeded=1))
    watcher.observe_job(job_state, "UserTerminate", now=0.0)

    assert watcher.all_tasks_done() is False
    assert watcher.job_over() is True


@pytest.mark.parametrize("job_state", [None, "active", "disabling", "disabled", "enabling"])
def test_job_not_over_in_other_states(job_state):
    watcher = _watcher(expected=5)
    watcher.observe_counts(_counts(active=5))
    if job_state:
        watcher.observe_job(job_state, None, now=0.0)

    assert watcher.job_over() is False


def test_terminal_states_are_the_wire_values():
    states = batch_models.BatchJobState

    assert tuple(enum_value(s) for s in (states.COMPLETED, states.TERMINATING, states.DELETING)) == TERMINAL_JOB_STATES


# -- which output to read --------------------------------------------------------------------------


def test_streams_to_read():
    watcher = _watcher(streamed=["run", "done", "queued", "unknown", "prep"])
    watcher.observe_task_states({"run": "running", "done": "completed", "queued": "active", "prep": "preparing"})

    assert watcher.streams_to_read() == [
        ("run", "stdout.txt", False),
        ("run", "stderr.txt", False),
        ("done", "stdout.txt", True),
        ("done", "stderr.txt", True),
    ]


def test_streams_to_read_skips_done_cursors():
    watcher = _watcher(streamed=["a", "b"], cursors={"a/stdout.txt": DONE, "b/stdout.txt": DONE, "b/stderr.txt": DONE})
    watcher.observe_task_states({"a": "completed", "b": "completed"})

    assert watcher.streams_to_read() == [("a", "stderr.txt", True)]


def test_streams_to_read_only_for_streamed_tasks_and_not_when_output_is_off():
    watcher = _watcher(streamed=["a"])
    watcher.observe_task_states({"a": "running", "other": "running"})
    off = JobWatcher(watcher.state, stream_output=False)

    assert [task for task, _, _ in watcher.streams_to_read()] == ["a", "a"]
    assert off.streams_to_read() == []
    assert off.tasks_to_refresh() == []


def test_tasks_to_refresh():
    watcher = _watcher(
        streamed=["new", "running", "flushed", "half", "done-unread"],
        cursors={
            "flushed/stdout.txt": DONE,
            "flushed/stderr.txt": DONE,
            "half/stdout.txt": DONE,
            "running/stdout.txt": DONE,
        },
    )
    watcher.observe_task_states(
        {"running": "running", "flushed": "completed", "half": "completed", "done-unread": "completed"}
    )

    assert watcher.tasks_to_refresh() == ["new", "running", "half", "done-unread"]


def test_observe_task_states_updates():
    watcher = _watcher(streamed=["a", "b"])
    watcher.observe_task_states({"a": "active", "b": "running"})
    watcher.observe_task_states({"a": "running"})

    assert watcher.state.task_states == {"a": "running", "b": "running"}


# -- observe_tail ----------------------------------------------------------------------------------


def test_observe_tail_prefixes_and_cursor():
    watcher = _watcher(streamed=["t1"])
    emitted: list[str] = []

    watcher.observe_tail("t1", "stdout.txt", TailResult(["hello", "", "world"], StreamCursor(13, "c1")), emitted.append)
    watcher.observe_tail("t1", "stderr.txt", TailResult(["oops"], StreamCursor(5, "c2", done=True)), emitted.append)

    assert emitted == ["[t1] hello", "[t1] ", "[t1] world", "[t1:stderr] oops"]
    assert watcher.state.cursors == {
        "t1/stdout.txt": {"offset": 13, "created": "c1", "done": False},
        "t1/stderr.txt": {"offset": 5, "created": "c2", "done": True},
    }
    assert watcher.cursor("t1", "stdout.txt") == StreamCursor(13, "c1")
    assert watcher.cursor("t1", "stderr.txt").done is True
    assert watcher.cursor("other", "stdout.txt") == StreamCursor()


@pytest.mark.parametrize(("stream", "prefix"), [("stdout.txt", "[t1]"), ("stderr.txt", "[t1:stderr]")])
def test_observe_tail_restart_marker(stream, prefix):
    watcher = _watcher(streamed=["t1"])
    emitted: list[str] = []

    watcher.observe_tail("t1", stream, TailResult(["again"], StreamCursor(6, "c2"), restarted=True), emitted.append)

    assert emitted == [f"{prefix} --- the task started over (retry); its output follows anew ---", f"{prefix} again"]


def test_observe_tail_with_nothing_new_still_stores_the_cursor():
    watcher = _watcher(streamed=["t1"])
    emitted: list[str] = []

    watcher.observe_tail(
        "t1", "stdout.txt", TailResult(cursor=StreamCursor(0, None, done=True), missing=True), emitted.append
    )

    assert emitted == []
    assert watcher.cursor("t1", "stdout.txt").done is True


def test_output_prefix():
    assert output_prefix("a-b", "stdout.txt") == "[a-b]"
    assert output_prefix("a-b", "stderr.txt") == "[a-b:stderr]"


# -- state and helpers -----------------------------------------------------------------------------


def test_watch_state_json_round_trip():
    watcher = _watcher(expected=2, streamed=["a", "b"])
    watcher.observe_counts(_counts(running=1, completed=1, succeeded=1))
    watcher.observe_job("active", None, now=42.0)
    watcher.observe_task_states({"a": "completed", "b": "running"})
    watcher.observe_tail("a", "stdout.txt", TailResult(["x"], StreamCursor(2, "c", done=True)), lambda _: None)

    data = json.loads(json.dumps(watcher.state.to_json()))
    restored = WatchState.from_json(data)

    assert data == {
        "job_id": "job-1",
        "expected_tasks": 2,
        "streamed": ["a", "b"],
        "cursors": {"a/stdout.txt": {"offset": 2, "created": "c", "done": True}},
        "task_states": {"a": "completed", "b": "running"},
        "counts": {"active": 0, "running": 1, "completed": 1, "succeeded": 1, "failed": 0},
        "job_state": "active",
        "terminate_reason": None,
        "last_job_check": 42.0,
        "pool_id": None,
        "last_pool_check": 0.0,
        "pool_check_interval": 30.0,
        "pool_suspect": False,
        "log_location": None,
    }
    assert restored == watcher.state
    # The restored watcher decides the same way.
    assert JobWatcher(restored).streams_to_read() == watcher.streams_to_read()
    assert JobWatcher(restored).observe_counts(_counts(running=1, completed=1, succeeded=1)) is None


def test_watch_state_to_json_copies():
    state = WatchState("j", streamed=["a"])
    data = state.to_json()
    data["streamed"].append("b")
    data["cursors"]["x"] = {}

    assert state.streamed == ["a"]
    assert state.cursors == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (batch_models.BatchTaskState.RUNNING, "running"),
        (batch_models.BatchTaskState.COMPLETED, "completed"),
        (batch_models.BatchJobState.TERMINATING, "terminating"),
        ("active", "active"),
        (None, "None"),
    ],
)
def test_enum_value(value, expected):
    assert enum_value(value) == expected


def test_streamed_filter_quotes_ids():
    assert _streamed_filter(["a", "it's"]) == "id eq 'a' or id eq 'it''s'"

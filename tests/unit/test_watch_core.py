"""The watch core (no I/O): what each step asks for, what the answers mean, and when the job is over.

Steps are driven by the real sync driver against ``Batch``, an in-memory account that answers the read
primitives the hooks offer (it stands in for the hook, not for the SDK or HTTP: the integration tests run
the same core against the local Batch service).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from azure.batch import models as batch_models

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.translate import id_filter
from airflow_provider_azbatch.model import reads
from airflow_provider_azbatch.model.reads import AsyncBatchReads, BatchReads
from airflow_provider_azbatch.model.records import TERMINAL_JOB_STATES, FileEnd, FileInfo, JobStatus, TaskCounts
from airflow_provider_azbatch.watching.core import (
    JOB_STATE_CHECK_SECONDS,
    QUIET_LOOKS_PER_LEVEL,
    JobWatcher,
    format_progress,
    output_prefix,
)
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.pool_health import PoolProblem
from airflow_provider_azbatch.watching.state import StreamCursor, WatchState


@dataclass
class Batch:
    """An account as the hook's read primitives see it; counts every call."""

    counts: TaskCounts = field(default_factory=TaskCounts)
    job: JobStatus | None = field(default_factory=lambda: JobStatus("active"))
    states: dict[str, str] = field(default_factory=dict)
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)
    created: dict[str, str] = field(default_factory=dict)
    node_gone: set[str] = field(default_factory=set)
    uploaded: dict[tuple[str, str], bytes] = field(default_factory=dict)
    failing: dict[str, Exception] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)

    def _called(self, name: str) -> None:
        self.calls[name] += 1
        if name in self.failing:
            raise self.failing[name]

    def get_task_counts(self, job_id: str) -> TaskCounts:
        self._called("get_task_counts")
        return self.counts

    def get_job_status(self, job_id: str) -> JobStatus | None:
        self._called("get_job_status")
        return self.job

    def list_task_states(self, job_id: str, task_ids: tuple[str, ...]) -> dict[str, str]:
        self._called("list_task_states")
        return {task: self.states[task] for task in task_ids if task in self.states}

    def list_task_files(self, job_id: str, task_id: str) -> dict[str, FileInfo] | None:
        self._called("list_task_files")
        if task_id in self.node_gone:
            return None
        return {
            name: FileInfo(len(data), self.created.get(task_id, "c1")) for name, data in self.files[task_id].items()
        }

    def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None:
        self._called("read_task_file")
        return self.files[task_id][path][start : end + 1]

    def get_uploaded_log_size(self, location: dict[str, str], job_id: str, task_id: str, name: str) -> int | None:
        self._called("get_uploaded_log_size")
        data = self.uploaded.get((task_id, name))
        return None if data is None else len(data)

    def read_uploaded_log(self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int):
        self._called("read_uploaded_log")
        return self.uploaded[(task_id, name)][start : end + 1]

    def read_task_file_tail(self, job_id: str, task_id: str, path: str, max_bytes: int) -> FileEnd | None:
        raise AssertionError("not used by a watch step")


class Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str | None, str]] = []

    def __call__(self, task_id: str | None, line: str) -> None:
        self.lines.append((task_id, line))

    def of(self, task_id: str | None) -> list[str]:
        return [line for task, line in self.lines if task == task_id]


def _watcher(expected=None, streamed=(), poll=5.0, **state: Any) -> tuple[JobWatcher, Lines]:
    lines = Lines()
    watcher = JobWatcher(
        WatchState("job-1", expected_tasks=expected, streamed=list(streamed), **state),
        lines,
        poll_interval=poll,
        idle_stream_seconds=30.0,
        partial_line_seconds=10.0,
    )
    return watcher, lines


def _step(watcher: JobWatcher, batch: Batch, now: float = 0.0) -> bool:
    return run_sync(watcher.step(now), batch)


# -- counts and the job ------------------------------------------------------------------------------


def test_progress_line_only_when_counts_change():
    watcher, lines = _watcher(expected=3)
    batch = Batch(counts=TaskCounts(active=3))
    _step(watcher, batch)
    _step(watcher, batch)
    batch.counts = TaskCounts(active=1, running=1, completed=1, succeeded=1)
    _step(watcher, batch)
    assert lines.of(None) == [
        "Batch job job-1: 3 active, 0 running, 0 succeeded, 0 failed of 3",
        "Batch job job-1: 1 active, 1 running, 1 succeeded, 0 failed of 3",
    ]
    assert watcher.state.counts == {"active": 1, "running": 1, "completed": 1, "succeeded": 1, "failed": 0}
    assert (
        format_progress("j", TaskCounts(1, 2, 3, 4, 5), None)
        == "Batch job j: 1 active, 2 running, 4 succeeded, 5 failed"
    )


def test_an_idle_poll_of_running_tasks_is_one_request():
    watcher, _ = _watcher(expected=10)
    batch = Batch(counts=TaskCounts(running=10))
    _step(watcher, batch, now=0.0)  # first poll: counts and the job
    assert batch.calls == {"get_task_counts": 1, "get_job_status": 1}
    batch.calls.clear()
    for second in range(1, 30):
        assert _step(watcher, batch, now=float(second)) is False
    assert batch.calls == {"get_task_counts": 29}


def test_the_job_is_read_every_poll_while_tasks_wait_so_an_outside_termination_is_seen():
    watcher, _ = _watcher(expected=2)
    batch = Batch(counts=TaskCounts(active=2))
    _step(watcher, batch, now=0.0)
    batch.calls.clear()
    _step(watcher, batch, now=1.0)
    assert batch.calls == {"get_task_counts": 1, "get_job_status": 1}
    # Someone terminates the job: its active tasks never run, the counts never move.
    batch.job = JobStatus("completed", "UserTerminate")
    assert _step(watcher, batch, now=2.0) is True
    assert watcher.state.terminate_reason == "UserTerminate"


def test_the_job_is_read_when_the_counts_move_and_every_minute():
    watcher, _ = _watcher(expected=3)
    batch = Batch(counts=TaskCounts(running=3))
    _step(watcher, batch, now=0.0)
    batch.calls.clear()
    batch.counts = TaskCounts(running=2, completed=1, succeeded=1)
    _step(watcher, batch, now=1.0)
    _step(watcher, batch, now=2.0)
    _step(watcher, batch, now=1.0 + JOB_STATE_CHECK_SECONDS)
    assert batch.calls == {"get_task_counts": 3, "get_job_status": 2}


@pytest.mark.parametrize(
    ("expected", "counts", "done"),
    [
        (2, TaskCounts(active=1, completed=1, succeeded=1), False),
        (2, TaskCounts(running=1, completed=1, succeeded=1), False),
        (2, TaskCounts(completed=1, succeeded=1), False),  # a task not counted yet
        (2, TaskCounts(completed=2, succeeded=1, failed=1), True),
        (2, TaskCounts(completed=3, succeeded=3), True),
        (None, TaskCounts(completed=5, succeeded=5), True),
        (None, TaskCounts(running=1, completed=5, succeeded=5), False),
        (None, TaskCounts(), False),  # a job watched from outside needs at least one task
    ],
)
def test_all_tasks_done(expected, counts, done):
    watcher, _ = _watcher(expected=expected)
    assert _step(watcher, Batch(counts=counts)) is done
    assert watcher.all_tasks_done() is done


@pytest.mark.parametrize("job_state", ["completed", "terminating", "deleting"])
def test_job_over_when_the_job_ended_with_tasks_left(job_state):
    watcher, _ = _watcher(expected=5)
    assert _step(watcher, Batch(counts=TaskCounts(active=3, running=1), job=JobStatus(job_state))) is True
    assert watcher.all_tasks_done() is False


def test_a_job_gone_between_two_requests_is_over():
    watcher, _ = _watcher(expected=5)
    assert _step(watcher, Batch(counts=TaskCounts(active=5), job=None)) is True
    assert watcher.state.job_state == "deleting"


@pytest.mark.parametrize("job_state", ["active", "disabling", "disabled", "enabling"])
def test_job_not_over_in_other_states(job_state):
    watcher, _ = _watcher(expected=5)
    assert _step(watcher, Batch(counts=TaskCounts(active=5), job=JobStatus(job_state))) is False


def test_terminal_states_are_the_wire_values():
    states = batch_models.BatchJobState
    assert tuple(enum_value(s) for s in (states.COMPLETED, states.TERMINATING, states.DELETING)) == TERMINAL_JOB_STATES


# -- output ------------------------------------------------------------------------------------------


def test_output_of_a_running_task_is_shown_with_its_task_id():
    watcher, lines = _watcher(expected=1, streamed=["t1"])
    batch = Batch(
        counts=TaskCounts(running=1),
        states={"t1": "running"},
        files={"t1": {"stdout.txt": b"hello\n\nworld\npart", "stderr.txt": b"oops\n"}},
    )
    _step(watcher, batch)
    assert lines.of("t1") == ["[t1] hello", "[t1] ", "[t1] world", "[t1:stderr] oops"]
    assert watcher.state.cursors == {
        "t1/stdout.txt": {"offset": 13, "created": "c1", "done": False},
        "t1/stderr.txt": {"offset": 5, "created": "c1", "done": False},
    }
    # The unfinished "part" is not read again; only what follows it is.
    batch.files["t1"]["stdout.txt"] += b"ial\n"
    batch.calls.clear()
    _step(watcher, batch, now=1.0)
    assert lines.of("t1")[-1] == "[t1] partial"
    assert batch.calls["read_task_file"] == 1


def test_a_finished_task_is_shown_to_the_end_then_left_alone():
    watcher, lines = _watcher(expected=1, streamed=["t1"])
    batch = Batch(
        counts=TaskCounts(completed=1, succeeded=1),
        states={"t1": "completed"},
        files={"t1": {"stdout.txt": b"a\nlast", "stderr.txt": b""}},
    )
    assert _step(watcher, batch) is True
    assert lines.of("t1") == ["[t1] a", "[t1] last"]
    assert watcher.state.cursor("t1", "stdout.txt").done
    assert watcher.state.cursor("t1", "stderr.txt").done
    batch.calls.clear()
    _step(watcher, batch, now=1.0)
    assert batch.calls == {"get_task_counts": 1}


def test_a_big_finished_file_takes_several_steps_and_the_job_is_over_only_then():
    lines = Lines()
    watcher = JobWatcher(WatchState("j", expected_tasks=1, streamed=["t"]), lines, max_read_bytes=10)
    data = b"".join(b"line %02d\n" % i for i in range(10))
    batch = Batch(
        counts=TaskCounts(completed=1, succeeded=1), states={"t": "completed"}, files={"t": {"stdout.txt": data}}
    )
    rounds = 1
    while not _step(watcher, batch, now=float(rounds)):
        rounds += 1
    assert rounds == 8
    assert lines.of("t") == [f"[t] line {i:02d}" for i in range(10)]


def test_a_quiet_stream_is_looked_at_less_often_within_the_bound():
    watcher, lines = _watcher(expected=1, streamed=["t1"], poll=1.0)
    batch = Batch(counts=TaskCounts(running=1), states={"t1": "running"}, files={"t1": {"stdout.txt": b"start\n"}})
    looks: list[int] = []
    for second in range(200):
        before = batch.calls["list_task_files"]
        _step(watcher, batch, now=float(second))
        if batch.calls["list_task_files"] > before:
            looks.append(second)
    gaps = [b - a for a, b in itertools.pairwise(looks)]
    # Every poll at first, then further apart, never more than idle_stream_seconds.
    assert gaps[:QUIET_LOOKS_PER_LEVEL] == [1] * QUIET_LOOKS_PER_LEVEL
    assert max(gaps) == 30
    assert len(looks) < 30  # against 200 polls
    # New output is seen at the next look and the stream is looked at every poll again.
    batch.files["t1"]["stdout.txt"] += b"more\n"
    second = 200
    while lines.of("t1")[-1] != "[t1] more":
        _step(watcher, batch, now=float(second))
        second += 1
    assert second - 200 <= 30
    before = batch.calls["list_task_files"]
    _step(watcher, batch, now=float(second))
    assert batch.calls["list_task_files"] == before + 1


def test_only_streamed_tasks_and_nothing_when_output_is_off():
    batch = Batch(
        counts=TaskCounts(running=2),
        states={"a": "running", "b": "running"},
        files={"a": {"stdout.txt": b"a\n"}, "b": {"stdout.txt": b"b\n"}},
    )
    watcher, lines = _watcher(expected=2, streamed=["a"])
    _step(watcher, batch)
    assert lines.of("a") == ["[a] a"]
    assert lines.of("b") == []
    off = JobWatcher(WatchState("job-1", expected_tasks=2, streamed=["a"]), Lines(), stream_output=False)
    batch.calls.clear()
    _step(off, batch)
    assert set(batch.calls) == {"get_task_counts", "get_job_status"}


@pytest.mark.parametrize(("stream", "prefix"), [("stdout.txt", "[t1]"), ("stderr.txt", "[t1:stderr]")])
def test_a_retried_task_starts_its_output_over(stream, prefix):
    watcher, lines = _watcher(expected=1, streamed=["t1"])
    batch = Batch(counts=TaskCounts(running=1), states={"t1": "running"}, files={"t1": {stream: b"first try\n"}})
    _step(watcher, batch)
    batch.files["t1"][stream] = b"again\n"
    batch.created["t1"] = "c2"
    _step(watcher, batch, now=1.0)
    assert lines.of("t1") == [
        f"{prefix} first try",
        f"{prefix} --- the task started over (retry); its output follows anew ---",
        f"{prefix} again",
    ]


def test_a_finished_task_whose_node_is_gone_is_read_from_its_uploaded_logs():
    location = {"container": "logs", "prefix": "p"}
    watcher, lines = _watcher(expected=1, streamed=["t1"], log_location=location)
    batch = Batch(
        counts=TaskCounts(completed=1, failed=1),
        states={"t1": "completed"},
        node_gone={"t1"},
        uploaded={("t1", "stdout.txt"): b"from blob\n"},
    )
    assert _step(watcher, batch) is True
    assert lines.of("t1") == ["[t1] from blob"]
    assert watcher.state.cursor("t1", "stderr.txt").done  # nothing uploaded: nothing to show


def test_an_error_keeps_what_was_read_before_it():
    watcher, lines = _watcher(expected=2, streamed=["a", "b"])
    batch = Batch(
        counts=TaskCounts(running=2),
        states={"a": "running", "b": "running"},
        files={"a": {"stdout.txt": b"a1\n"}, "b": {"stdout.txt": b"b1\n"}},
    )
    _step(watcher, batch)
    batch.files["a"]["stdout.txt"] += b"a2\n"
    batch.failing["read_task_file"] = ConnectionError("dropped")
    with pytest.raises(ConnectionError):
        _step(watcher, batch, now=1.0)
    del batch.failing["read_task_file"]
    _step(watcher, batch, now=2.0)
    assert lines.of("a") == ["[a] a1", "[a] a2"]
    assert lines.of("b") == ["[b] b1"]


def test_output_prefix():
    assert output_prefix("a-b", "stdout.txt") == "[a-b]"
    assert output_prefix("a-b", "stderr.txt") == "[a-b:stderr]"


# -- the pool ---------------------------------------------------------------------------------------


@dataclass
class WaitingJob(Batch):
    """A job whose pool ``p`` has no nodes yet, no error either."""

    def get_pool_snapshot(self, pool_id: str) -> batch_models.BatchPool:
        self._called("get_pool_snapshot")
        return _pool()

    def list_nodes_in_states(self, pool_id: str, states: tuple[str, ...]) -> list[Any]:
        self._called("list_nodes_in_states")
        return []

    def list_pool_nodes(self, pool_id: str) -> list[Any]:
        self._called("list_pool_nodes")
        return []


def test_the_pool_is_looked_at_only_while_tasks_wait_and_then_every_interval():
    watcher, _ = _watcher(expected=1, pool_id="p", pool_check_interval=30.0)
    batch = WaitingJob(counts=TaskCounts(running=1))
    _step(watcher, batch, now=0.0)
    assert batch.calls["get_pool_snapshot"] == 0
    batch.counts = TaskCounts(active=1)
    for now in (1.0, 2.0, 30.0, 31.0):
        _step(watcher, batch, now=now)
    assert batch.calls["get_pool_snapshot"] == 2
    # Its nodes, for what they cost idle: at the first look; the counts that moved a second later are too soon
    # (10 s apart at least), and the next minute is not over.
    assert batch.calls["list_pool_nodes"] == 1


def _pool(errors=(), current=0, allocation="steady") -> batch_models.BatchPool:
    return batch_models.BatchPool(
        id="p",
        allocation_state=allocation,
        current_dedicated_nodes=current,
        current_low_priority_nodes=0,
        enable_auto_scale=False,
        resize_errors=[batch_models.ResizeError(code=c, message=m) for c, m in errors],
    )


def test_a_pool_that_cannot_allocate_fails_the_watch():
    watcher, _ = _watcher(expected=1, pool_id="p")
    gen = watcher.step(0.0)
    next(gen)
    gen.send([TaskCounts(active=1), JobStatus("active", pool_id="p")])
    assert [call.name for call in gen.send([_pool(errors=[("AccountCoreQuotaReached", "full")]), []])] == [
        "list_nodes_in_states"
    ]
    with pytest.raises(
        PoolProblem, match=r"Pool p could not allocate nodes for the job: AccountCoreQuotaReached: full"
    ):
        gen.send([[]])


# -- state ------------------------------------------------------------------------------------------


def test_watch_state_json_round_trip_holds_no_clock_readings():
    watcher, _ = _watcher(expected=2, streamed=["a", "b"])
    batch = Batch(
        counts=TaskCounts(running=1, completed=1, succeeded=1),
        states={"a": "completed", "b": "running"},
        files={"a": {"stdout.txt": b"x\n"}, "b": {}},
    )
    _step(watcher, batch, now=1_000_000.0)
    data = json.loads(json.dumps(watcher.state.to_json()))
    assert data == {
        "job_id": "job-1",
        "expected_tasks": 2,
        "streamed": ["a", "b"],
        "cursors": {
            "a/stdout.txt": {"offset": 2, "created": "c1", "done": True},
            "a/stderr.txt": {"offset": 0, "created": None, "done": True},
        },
        "task_states": {"a": "completed", "b": "running"},
        "counts": {"active": 0, "running": 1, "completed": 1, "succeeded": 1, "failed": 0},
        "job_state": "active",
        "terminate_reason": None,
        "pool_id": None,
        "pool_check_interval": 30.0,
        "pool_suspect": False,
        "log_location": None,
        "auto_pool_vm_size": None,
        "nodes": {},
        "has_preparation": False,
        "waits_for_preparation": False,
        "has_release": False,
        "blocked": None,
        "spot": None,
        "pool_idle": {},
        "gaps": {},
    }
    assert WatchState.from_json(data) == watcher.state


def test_a_state_from_an_earlier_version_drops_its_monotonic_readings():
    state = WatchState.from_json({"job_id": "j", "last_job_check": 123456.0, "last_pool_check": 99.0})
    assert state == WatchState("j")


def test_every_call_names_a_read_of_both_hooks_and_makes_it():
    import inspect

    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook

    names = [name for name in vars(BatchReads) if not name.startswith("_")]
    assert names == [name for name in vars(AsyncBatchReads) if not name.startswith("_")]
    assert len(names) == 17
    for name in names:
        assert callable(getattr(AzureBatchHook, name)), name
        assert inspect.iscoroutinefunction(getattr(AzureBatchAsyncHook, name)), name
        make = getattr(reads, name)  # the read's Call, named like it, made by each hook with the arguments given
        arguments = tuple(f"arg{i}" for i in range(len(inspect.signature(make).parameters)))
        call = make(*arguments)
        assert call.name == name
        sync, asynchronous = mock.Mock(), mock.AsyncMock()
        assert call.sync(sync) is getattr(sync, name).return_value
        getattr(sync, name).assert_called_once_with(*arguments)
        assert asyncio.run(call.asynchronous(asynchronous)) is getattr(asynchronous, name).return_value
        getattr(asynchronous, name).assert_awaited_once_with(*arguments)


def test_cursor_json():
    assert StreamCursor.from_json(None) == StreamCursor(0, None, False)
    assert StreamCursor.from_json({"offset": 3, "created": "c", "done": True}).to_json() == {
        "offset": 3,
        "created": "c",
        "done": True,
    }


def test_id_filter_quotes_ids():
    assert id_filter(["a", "it's"]) == "id eq 'a' or id eq 'it''s'"


def test_the_nodes_of_a_pool_made_for_the_job_are_recorded_with_when_they_left():
    from airflow_provider_azbatch.model.records import NodeTimes

    @dataclass
    class AutoPoolJob(Batch):
        nodes: list = field(default_factory=list)

        def list_pool_nodes(self, pool_id):
            self._called("list_pool_nodes")
            return list(self.nodes)

    watcher, _ = _watcher(expected=2, auto_pool_vm_size="standard_d2s_v3")
    batch = AutoPoolJob(
        counts=TaskCounts(running=2),
        job=JobStatus("active", pool_id="auto-1"),
        nodes=[NodeTimes("n1", True, "2026-12-01T10:00:00+00:00"), NodeTimes("n2", False, "2026-12-01T10:00:05+00:00")],
    )
    _step(watcher, batch, now=1_764_583_300.0)
    _step(watcher, batch, now=1_764_583_301.0)  # nothing moved, within the sample interval: no listing
    assert batch.calls["list_pool_nodes"] == 1
    batch.nodes = batch.nodes[:1]
    _step(watcher, batch, now=1_764_583_300.0 + 60)
    assert watcher.state.nodes == {
        "n1": {
            "dedicated": True,
            "allocated": "2026-12-01T10:00:00+00:00",
            "gone": False,
            "seen": "2025-12-01T10:02:40+00:00",
        },
        "n2": {
            "dedicated": False,
            "allocated": "2026-12-01T10:00:05+00:00",
            "gone": True,
            "seen": "2025-12-01T10:01:40+00:00",
        },
    }


def test_the_token_bucket_grants_its_rate_and_burst():
    from airflow_provider_azbatch.watching.budget import TokenBucket

    bucket = TokenBucket(rate=10, burst=10)
    assert bucket.grant(25, now=100.0) == 10  # the burst
    assert bucket.grant(5, now=100.0) == 0
    assert bucket.grant(5, now=100.3) == 3  # 0.3 s at 10 a second
    assert bucket.grant(50, now=200.0) == 10  # never more than the burst


def test_quiet_and_new_streams_share_the_budget_streams_that_grew_do_not():
    from airflow_provider_azbatch.watching.budget import TokenBucket

    tasks = [f"t{i:02d}" for i in range(20)]
    lines = Lines()
    watcher = JobWatcher(
        WatchState("j", expected_tasks=20, streamed=tasks),
        lines,
        poll_interval=1.0,
        look_budget=TokenBucket(rate=4, burst=4),
    )
    batch = Batch(
        counts=TaskCounts(running=20),
        states=dict.fromkeys(tasks, "running"),
        files={task: {"stdout.txt": b""} for task in tasks},
    )
    _step(watcher, batch, now=0.0)
    assert batch.calls["list_task_files"] == 4  # the first looks at 20 new tasks are spread over polls
    for second in range(1, 5):
        _step(watcher, batch, now=float(second))
    assert batch.calls["list_task_files"] == 20  # each looked at once in 5 polls
    # Two tasks start writing: from their next look on they are followed every poll, budget or not.
    batch.files["t00"]["stdout.txt"] = b"a\n"
    batch.files["t01"]["stdout.txt"] = b"b\n"
    while not (lines.of("t00") and lines.of("t01")):
        second += 1
        _step(watcher, batch, now=float(second))
    batch.calls.clear()
    watcher.look_budget = TokenBucket(rate=0, burst=0)  # no budget left at all
    for later in range(second + 1, second + 6):
        batch.files["t00"]["stdout.txt"] += b"more\n"
        batch.files["t01"]["stdout.txt"] += b"more\n"
        _step(watcher, batch, now=float(later))
    assert batch.calls["list_task_files"] == 10  # the two streams that keep growing, every poll
    assert lines.of("t00") == ["[t00] a"] + ["[t00] more"] * 5


def _shown(offset: int, created: str | None = "t0", done: bool = False, **more: dict) -> WatchState:
    cursors = {"a/stdout.txt": {"offset": offset, "created": created, "done": done}, **more}
    return WatchState(job_id="j", cursors=cursors)


def test_a_checkpoint_is_past_a_state_when_every_stream_is_shown_as_far_and_one_further():
    assert _shown(10).shown_past(_shown(5))
    assert not _shown(5).shown_past(_shown(5))  # the same: nothing to catch up with
    assert not _shown(5).shown_past(_shown(10))  # behind: taking it would show lines again
    assert _shown(10, done=True).shown_past(_shown(10))  # read to the end
    assert _shown(3, created=None).shown_past(_shown(0, created=None))
    assert _shown(3).shown_past(WatchState(job_id="j"))  # the other had not read the stream yet
    # One stream further, another behind: not past.
    other = {"a/stderr.txt": {"offset": 1, "created": "t0", "done": False}}
    assert not _shown(10).shown_past(_shown(5, **other))
    # A file started over (a retried task): offsets of two files cannot be compared.
    assert not _shown(10, created="t1").shown_past(_shown(5, created="t0"))
    # Another job's state never is.
    assert not WatchState(job_id="k", cursors=_shown(10).cursors).shown_past(_shown(5))


def test_a_job_the_view_lists_completed_is_over_only_once_its_streamed_output_is_shown_to_the_end():
    from types import SimpleNamespace

    from airflow_provider_azbatch.triggers.watch_loop import ended_as_listed

    watcher, lines = _watcher(expected=1, streamed=["t1"])
    batch = Batch(
        counts=TaskCounts(running=1),
        states={"t1": "running"},
        files={"t1": {"stdout.txt": b"a\n", "stderr.txt": b""}},
    )
    assert _step(watcher, batch) is False
    # The task writes its last line and ends; the account view's listing says the job completed before a look
    # at the job has seen it.
    batch.counts, batch.states["t1"] = TaskCounts(completed=1, succeeded=1), "completed"
    batch.files["t1"]["stdout.txt"] = b"a\nlast\n"
    listed = SimpleNamespace(last_change=SimpleNamespace(state="completed"))
    assert ended_as_listed(listed, watcher) is False
    # Reads between two looks do not end the watch: the task's final state and output are a look's to read.
    assert run_sync(watcher.read(1.0, ()), batch) is False
    assert _step(watcher, batch, now=2.0) is True
    assert lines.of("t1") == ["[t1] a", "[t1] last"]


def test_a_job_the_view_lists_completed_without_streamed_output_is_over_without_a_look():
    from types import SimpleNamespace

    from airflow_provider_azbatch.triggers.watch_loop import ended_as_listed

    watcher, _ = _watcher(expected=1)
    _step(watcher, Batch(counts=TaskCounts(running=1)))
    assert ended_as_listed(SimpleNamespace(last_change=SimpleNamespace(state="completed")), watcher) is True
    assert watcher.state.job_state == "completed"


def test_a_job_terminated_before_its_streamed_task_ran_is_over_at_the_next_look():
    from types import SimpleNamespace

    from airflow_provider_azbatch.triggers.watch_loop import ended_as_listed

    watcher, lines = _watcher(expected=1, streamed=["t1"])
    batch = Batch(counts=TaskCounts(active=1), states={"t1": "active"}, files={"t1": {}})
    assert _step(watcher, batch) is False
    # Terminated from outside: the job completed, its task never ran (it stays active).
    batch.job = JobStatus("completed")
    assert ended_as_listed(SimpleNamespace(last_change=SimpleNamespace(state="completed")), watcher) is False
    assert run_sync(watcher.read(1.0, ()), batch) is False
    assert run_sync(watcher.look(2.0, ()), batch) is True
    assert lines.of("t1") == []

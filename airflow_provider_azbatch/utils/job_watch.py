"""Watching a Batch job: progress, which tasks' output to read, and when the job is over.

The decisions live in :class:`JobWatcher` (no I/O, JSON-serialisable state, so the trigger can
carry it in its kwargs and events). :func:`watch_step` and :func:`awatch_step` do one poll with the
sync or the aio client. What one poll costs while nothing changes: one ``taskcounts`` request,
plus one file-size request per *running streamed* task (a task whose output is being shown).

Which output is shown, for jobs of any size: stdout and stderr of the first ``max_streamed_tasks``
tasks (submission order) live; for any failed task, the last lines of its stderr at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_azbatch.utils.log_tail import STREAMS, StreamCursor, TailResult, atail_file, tail_file
from airflow_provider_azbatch.utils.pool_health import PoolProblem, acheck_pool, check_pool

# Even when task counts do not move, look at the job itself this often (someone may have
# terminated a job whose tasks never started).
JOB_STATE_CHECK_SECONDS = 60.0
TERMINAL_JOB_STATES = ("completed", "terminating", "deleting")

Emit = Callable[[str], None]


@dataclass
class TaskCounts:
    active: int = 0
    running: int = 0
    completed: int = 0
    succeeded: int = 0
    failed: int = 0

    @classmethod
    def from_sdk(cls, result: Any) -> TaskCounts:
        counts = result.task_counts
        return cls(counts.active, counts.running, counts.completed, counts.succeeded, counts.failed)

    def to_json(self) -> dict[str, int]:
        return {
            "active": self.active,
            "running": self.running,
            "completed": self.completed,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }


@dataclass
class WatchState:
    job_id: str
    expected_tasks: int | None = None
    streamed: list[str] = field(default_factory=list)
    cursors: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_states: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] | None = None
    job_state: str | None = None
    terminate_reason: str | None = None
    last_job_check: float = 0.0
    pool_id: str | None = None
    last_pool_check: float = 0.0
    pool_check_interval: float = 30.0
    # The last look at the pool found a problem one look cannot prove (see PoolProblem.certain).
    pool_suspect: bool = False
    # Where the tasks' logs are uploaded (container and prefix), read once a node is gone.
    log_location: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "expected_tasks": self.expected_tasks,
            "streamed": list(self.streamed),
            "cursors": dict(self.cursors),
            "task_states": dict(self.task_states),
            "counts": self.counts,
            "job_state": self.job_state,
            "terminate_reason": self.terminate_reason,
            "last_job_check": self.last_job_check,
            "pool_id": self.pool_id,
            "last_pool_check": self.last_pool_check,
            "pool_check_interval": self.pool_check_interval,
            "pool_suspect": self.pool_suspect,
            "log_location": self.log_location,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchState:
        return cls(**data)


def format_progress(job_id: str, counts: TaskCounts, expected: int | None) -> str:
    total = f" of {expected}" if expected is not None else ""
    return (
        f"Batch job {job_id}: {counts.active} active, {counts.running} running, "
        f"{counts.succeeded} succeeded, {counts.failed} failed{total}"
    )


def output_prefix(task_id: str, stream: str) -> str:
    return f"[{task_id}]" if stream == STREAMS[0] else f"[{task_id}:stderr]"


class JobWatcher:
    """What to ask the service next, and what the answers mean. No I/O."""

    def __init__(self, state: WatchState, *, stream_output: bool = True) -> None:
        self.state = state
        self.stream_output = stream_output

    # -- counts and job state -----------------------------------------------------------------------
    def observe_counts(self, counts: TaskCounts) -> str | None:
        """A progress line when the counts moved (and remember them)."""
        current = counts.to_json()
        if current == self.state.counts:
            return None
        self.state.counts = current
        return format_progress(self.state.job_id, counts, self.state.expected_tasks)

    def counts_changed_since(self, before: dict[str, int] | None) -> bool:
        return before != self.state.counts

    def job_check_due(self, now: float, counts_moved: bool) -> bool:
        return counts_moved or now - self.state.last_job_check >= JOB_STATE_CHECK_SECONDS

    def observe_job(self, state: str, terminate_reason: str | None, now: float, pool_id: str | None = None) -> None:
        self.state.job_state = state
        self.state.terminate_reason = terminate_reason
        self.state.last_job_check = now
        if pool_id:
            self.state.pool_id = pool_id

    def observe_pool(self, problem: PoolProblem | None) -> None:
        """Raise the problem if it is certain, or seen at two looks in a row."""
        if problem is None:
            self.state.pool_suspect = False
            return
        if problem.certain or self.state.pool_suspect:
            raise problem
        self.state.pool_suspect = True

    def pool_check_due(self, now: float) -> bool:
        """Tasks wait and none runs: is the pool still able to give them nodes? (checked now and then)"""
        counts = self.state.counts
        waiting = counts is not None and counts["active"] > 0 and counts["running"] == 0
        return (
            waiting
            and self.state.pool_id is not None
            and self.state.job_state not in TERMINAL_JOB_STATES
            and now - self.state.last_pool_check >= self.state.pool_check_interval
        )

    def all_tasks_done(self) -> bool:
        counts = self.state.counts
        if counts is None or counts["active"] or counts["running"]:
            return False
        # A job watched from outside (the sensor) has no known size: it needs at least one task.
        return counts["completed"] >= (self.state.expected_tasks if self.state.expected_tasks is not None else 1)

    def job_over(self) -> bool:
        """Every task finished, or the job ended (terminated, hit its wall clock) with tasks left."""
        return self.all_tasks_done() or self.state.job_state in TERMINAL_JOB_STATES

    # -- output ---------------------------------------------------------------------------------------
    def tasks_to_refresh(self) -> list[str]:
        """Streamed tasks whose state we need (those not yet finished and flushed)."""
        if not self.stream_output:
            return []
        return [task for task in self.state.streamed if not self._flushed(task)]

    def observe_task_states(self, states: dict[str, str]) -> None:
        self.state.task_states.update(states)

    def streams_to_read(self) -> list[tuple[str, str, bool]]:
        """(task id, file, final) for every stream worth a read now."""
        if not self.stream_output:
            return []
        out = []
        for task in self.state.streamed:
            state = self.state.task_states.get(task)
            if state not in ("running", "completed"):
                continue
            for stream in STREAMS:
                if not self.cursor(task, stream).done:
                    out.append((task, stream, state == "completed"))
        return out

    def cursor(self, task: str, stream: str) -> StreamCursor:
        return StreamCursor.from_json(self.state.cursors.get(f"{task}/{stream}"))

    def observe_tail(self, task: str, stream: str, result: TailResult, emit: Emit) -> None:
        if result.restarted:
            emit(f"{output_prefix(task, stream)} --- the task started over (retry); its output follows anew ---")
        prefix = output_prefix(task, stream)
        for line in result.lines:
            emit(f"{prefix} {line}")
        self.state.cursors[f"{task}/{stream}"] = result.cursor.to_json()

    def _flushed(self, task: str) -> bool:
        return self.state.task_states.get(task) == "completed" and all(self.cursor(task, s).done for s in STREAMS)


def enum_value(value: Any) -> str:
    """SDK enums are str subclasses whose str() is 'Class.MEMBER'; the wire value is what counts."""
    return str(getattr(value, "value", value))


def _streamed_filter(task_ids: list[str]) -> str:
    return " or ".join("id eq '{}'".format(task.replace("'", "''")) for task in task_ids)


def watch_step(client: Any, watcher: JobWatcher, emit: Emit, *, max_bytes: int, fallback: Any = None) -> bool:
    """One poll with the sync client; True once the job is over and its output flushed.

    Raises :class:`~airflow_provider_azbatch.utils.pool_health.PoolProblem` when the job waits for a
    pool that cannot give it nodes.
    """
    state = watcher.state
    before = state.counts
    progress = watcher.observe_counts(TaskCounts.from_sdk(client.get_job_task_counts(state.job_id)))
    if progress:
        emit(progress)
    moved = watcher.counts_changed_since(before)
    now = time.monotonic()
    if watcher.job_check_due(now, moved):
        job = client.get_job(state.job_id, select=["state", "executionInfo"])
        info = job.execution_info
        watcher.observe_job(
            enum_value(job.state), getattr(info, "termination_reason", None), now, getattr(info, "pool_id", None)
        )
    if watcher.pool_check_due(now):
        state.last_pool_check = now
        try:
            check_pool(client, state.pool_id)
        except PoolProblem as problem:
            watcher.observe_pool(problem)
        else:
            watcher.observe_pool(None)
    refresh = watcher.tasks_to_refresh()
    if refresh and (moved or any(state.task_states.get(t) is None for t in refresh)):
        found = client.list_tasks(state.job_id, filter=_streamed_filter(refresh), select=["id", "state"])
        watcher.observe_task_states({task.id: enum_value(task.state) for task in found})
    for task, stream, final in watcher.streams_to_read():
        result = tail_file(
            client,
            state.job_id,
            task,
            stream,
            watcher.cursor(task, stream),
            final=final,
            max_bytes=max_bytes,
            fallback=fallback,
        )
        watcher.observe_tail(task, stream, result, emit)
    return watcher.job_over() and not any(final for _, _, final in watcher.streams_to_read())


async def awatch_step(client: Any, watcher: JobWatcher, emit: Emit, *, max_bytes: int, fallback: Any = None) -> bool:
    """The same poll with the ``azure.batch.aio`` client (used by the trigger)."""
    state = watcher.state
    before = state.counts
    progress = watcher.observe_counts(TaskCounts.from_sdk(await client.get_job_task_counts(state.job_id)))
    if progress:
        emit(progress)
    moved = watcher.counts_changed_since(before)
    now = time.monotonic()
    if watcher.job_check_due(now, moved):
        job = await client.get_job(state.job_id, select=["state", "executionInfo"])
        info = job.execution_info
        watcher.observe_job(
            enum_value(job.state), getattr(info, "termination_reason", None), now, getattr(info, "pool_id", None)
        )
    if watcher.pool_check_due(now):
        state.last_pool_check = now
        try:
            await acheck_pool(client, state.pool_id)
        except PoolProblem as problem:
            watcher.observe_pool(problem)
        else:
            watcher.observe_pool(None)
    refresh = watcher.tasks_to_refresh()
    if refresh and (moved or any(state.task_states.get(t) is None for t in refresh)):
        found = client.list_tasks(state.job_id, filter=_streamed_filter(refresh), select=["id", "state"])
        watcher.observe_task_states({task.id: enum_value(task.state) async for task in found})
    for task, stream, final in watcher.streams_to_read():
        result = await atail_file(
            client,
            state.job_id,
            task,
            stream,
            watcher.cursor(task, stream),
            final=final,
            max_bytes=max_bytes,
            fallback=fallback,
        )
        watcher.observe_tail(task, stream, result, emit)
    return watcher.job_over() and not any(final for _, _, final in watcher.streams_to_read())

"""The watch of one Batch job, written once for the worker and the triggerer. No I/O.

Each :meth:`JobWatcher.step` is a generator of :class:`~airflow_provider_azbatch.model.reads.Call` batches (see
:mod:`.drivers`). What a step costs:

- always one ``taskcounts`` request; the job itself is read when the counts moved, every poll while
  tasks wait and none runs (so a job terminated from outside is noticed at the next poll), and at least
  every ``JOB_STATE_CHECK_SECONDS``;
- the pool, every ``pool_check_interval`` while tasks wait and none runs (and the job preparation task's
  status, when the tasks wait for it);
- the pool's nodes, at the first look, every minute, and when the counts move (for a shared or existing pool at
  most every 10 s: :mod:`.idle_time`), for what the job and the pool's idle nodes cost;
- on a pool that may have Spot nodes, the running tasks' attempts (:mod:`.preemption`);
- the active and the failed tasks, once no task runs and some failed, when the counts moved (see
  :mod:`.blocking`: tasks that wait on failed tasks end the watch);
- the states of the streamed tasks, when the counts moved;
- for each streamed task that runs: one file listing, then one ranged read per stream that grew, of the new
  bytes only, as often as its output grows (:mod:`.following`).

Which output is shown, for jobs of any size: stdout and stderr of the ``streamed`` tasks (the first
``max_streamed_tasks`` submitted); for failed tasks, the last lines of stderr in the failure report.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.reads import Call
from airflow_provider_azbatch.model.records import (
    TERMINAL_JOB_STATES,
    ActiveTask,
    FailedTask,
    JobStatus,
    TaskCounts,
)
from airflow_provider_azbatch.model.verdict import RELEASED_STATES, tasks_done
from airflow_provider_azbatch.watching.blocking import (
    Blocked,
    blocked_by_dependencies,
    blocked_state,
)
from airflow_provider_azbatch.watching.budget import Unlimited
from airflow_provider_azbatch.watching.calls import Step, ask, raise_first_error
from airflow_provider_azbatch.watching.following import (
    DEFAULT_IDLE_STREAM_SECONDS,
    DEFAULT_PARTIAL_LINE_SECONDS,
    QUIET_LOOKS_PER_LEVEL,
    RESTART_NOTICE,
    TASK_STATES,
    Emit,
    LookBudget,
    OutputFollower,
    ReadKey,
    output_prefix,
)
from airflow_provider_azbatch.watching.pool_looks import PoolLooks
from airflow_provider_azbatch.watching.preemption import check_fallback, track_attempts
from airflow_provider_azbatch.watching.reads import ReadSchedule
from airflow_provider_azbatch.watching.state import WatchState

# What the output's room (.following) names, here where the watch's users have always found it.
__all__ = [
    "JOB_STATE_CHECK_SECONDS",
    "QUIET_LOOKS_PER_LEVEL",
    "RESTART_NOTICE",
    "TASK_STATES",
    "Emit",
    "JobWatcher",
    "LookBudget",
    "ReadKey",
    "format_progress",
    "output_prefix",
]

# Even when task counts do not move, look at the job itself this often.
JOB_STATE_CHECK_SECONDS = 60.0


def format_progress(job_id: str, counts: TaskCounts, expected: int | None) -> str:
    total = f" of {expected}" if expected is not None else ""
    return (
        f"Batch job {job_id}: {counts.active} active, {counts.running} running, "
        f"{counts.succeeded} succeeded, {counts.failed} failed{total}"
    )


class JobWatcher(PoolLooks):
    """What to ask the service next about one job, and what the answers mean (its pool's part:
    :class:`~.pool_looks.PoolLooks`; its output's: :class:`~.following.OutputFollower`)."""

    def __init__(
        self,
        state: WatchState,
        emit: Emit,
        *,
        stream_output: bool = True,
        poll_interval: float = 5.0,
        max_read_bytes: int = 1024 * 1024,
        idle_stream_seconds: float = DEFAULT_IDLE_STREAM_SECONDS,
        partial_line_seconds: float = DEFAULT_PARTIAL_LINE_SECONDS,
        look_budget: LookBudget | None = None,
    ) -> None:
        self.state = state
        self.emit = emit
        # Scheduling of this process's own looks: not part of the state (a resumed watch looks at once).
        self.last_job_check: float | None = None
        self.last_pool_check: float | None = None
        self.last_node_sample: float | None = None
        # Something else reports a change of the job's state (a trigger's account view, while it looks): no
        # periodic read of the job for that.
        self.job_state_watched = False
        # The task counts at the last look at the job's dependencies (looked at again when they move).
        self._dependencies_seen_at: dict[str, int] | None = None
        # Whether the counts moved at the last look at the job.
        self.last_look_moved = False
        self.output = OutputFollower(
            state,
            emit,
            stream_output=stream_output,
            poll_interval=poll_interval,
            max_read_bytes=max_read_bytes,
            idle_stream_seconds=idle_stream_seconds,
            partial_line_seconds=partial_line_seconds,
            look_budget=look_budget or Unlimited(),
        )

    @property
    def look_budget(self) -> LookBudget:
        """The looks at quiet streams this watch shares with others."""
        return self.output.look_budget

    @look_budget.setter
    def look_budget(self, value: LookBudget) -> None:
        self.output.look_budget = value

    # -- one poll -----------------------------------------------------------------------------------
    def step(self, now: float) -> Step[bool]:
        """One poll; True once the job is over and the output of its streamed tasks shown to the end.

        Raises :class:`~airflow_provider_azbatch.watching.pool_health.PoolProblem` when the job waits for a pool
        that cannot give it nodes, and the first error of a request otherwise (what was learnt before
        it is kept).
        """
        yield from self._look_at_job(now)
        return (yield from self._output_then_over(now))

    def look(self, now: float, grants: Collection[ReadKey] = ()) -> Step[bool]:
        """A look at the job (as :meth:`step`) with the output reads a shared scheduler granted (see
        :meth:`read_schedules`) rather than those due by this watch's own cadence; a finished task's output is
        read to its end whatever was granted. True once the job is over and its output shown to the end."""
        yield from self._look_at_job(now)
        return (yield from self._granted_output(now, grants))

    def read(self, now: float, grants: Collection[ReadKey]) -> Step[bool]:
        """The granted output reads alone, between two looks at the job (see :meth:`look`). Never True while a
        streamed task is followed: its state is a look's to learn (the job may be over, its tasks' states not yet
        read), and its last output with it."""
        done = yield from self._granted_output(now, grants)
        return done and not self.following()

    def _look_at_job(self, now: float) -> Step[None]:
        state = self.state
        check_job = self._job_check_due(now)
        calls: list[Call[Any]] = [read.get_task_counts(state.job_id)]
        if check_job:
            calls.append(read.get_job_status(state.job_id))
        results = yield calls
        raise_first_error(results)
        first = state.counts is None
        moved = self._observe_counts(results[0])
        # The first look has nothing to compare with: what it sees is not movement (a waiting job backs off).
        self.last_look_moved = moved and not first
        if check_job:
            self._observe_job(results[1], now)
        elif moved and not self.all_tasks_done() and not self.job_state_watched:
            (status,) = yield from ask(read.get_job_status(state.job_id))
            self._observe_job(status, now)
        if self._dependency_check_due():
            self._dependencies_seen_at = state.counts
            active, failed = yield from ask(
                read.list_active_dependencies(state.job_id), read.list_failed_tasks(state.job_id)
            )
            self._observe_dependencies(active, failed)
        if state.spot is not None and not self.all_tasks_done() and state.job_state not in TERMINAL_JOB_STATES:
            yield from track_attempts(state, now, self.emit)
            check_fallback(state, now)
        if self._pool_check_due(now):
            yield from self._check_pool(now)
        if self._node_sample_due(now, moved):
            yield from self._sample_nodes(now)
        refresh = self._tasks_to_refresh()
        if refresh and (moved or any(state.task_states.get(task) is None for task in refresh)):
            (states,) = yield from ask(read.list_task_states(state.job_id, tuple(refresh)))
            state.task_states.update(states)

    def _output_then_over(self, now: float) -> Step[bool]:
        """Show the streamed tasks' new output; True once the job is over and its output shown to the end."""
        try:
            yield from self.output.follow(now)
        finally:
            self.output.save_cursors()
        return self.job_over() and not self.unfinished_output()

    def following(self) -> bool:
        """Whether output is streamed and some of it is still to show (a follow poll is due every poll)."""
        return bool(self._tasks_to_refresh())

    # -- counts, job and pool -----------------------------------------------------------------------
    def _observe_counts(self, counts: TaskCounts) -> bool:
        current = counts.to_json()
        if current == self.state.counts:
            return False
        self.state.counts = current
        self.emit(None, format_progress(self.state.job_id, counts, self.state.expected_tasks))
        return True

    def _job_check_due(self, now: float) -> bool:
        if self.last_job_check is None:
            if self.job_state_watched and self.state.pool_id is not None:
                self.last_job_check = now  # its state is reported by whoever watches it; its pool is known
                return False
            return True
        if self.state.has_release and self.all_tasks_done():
            return True  # its release task runs now: the job is over when it completes
        if self.job_state_watched:
            return False  # a change of the job's state is reported by whoever watches it (the account view)
        if self.waiting_for_nodes():
            return True
        return now - self.last_job_check >= JOB_STATE_CHECK_SECONDS

    def _observe_job(self, status: JobStatus | None, now: float) -> None:
        self.last_job_check = now
        if status is None:  # gone between two requests: it is being deleted
            self.state.job_state = "deleting"
            return
        self.state.job_state = status.state
        self.state.terminate_reason = status.terminate_reason
        if status.pool_id:
            self.state.pool_id = status.pool_id

    # -- what can never run -------------------------------------------------------------------------
    def _dependency_check_due(self) -> bool:
        """No task runs, some failed, some wait: whether they wait for nothing (looked at when counts move)."""
        state = self.state
        counts = state.counts
        return (
            state.blocked is None
            and counts is not None
            and counts["running"] == 0
            and counts["active"] > 0
            and counts["failed"] > 0
            and state.job_state not in TERMINAL_JOB_STATES
            and counts != self._dependencies_seen_at
        )

    def _observe_dependencies(self, active: list[ActiveTask], failed: list[FailedTask]) -> None:
        blocked, waited_on = blocked_by_dependencies(active, failed)
        if active and len(blocked) == len(active):
            self.state.blocked = blocked_state("dependencies", blocked, len(blocked), failed=waited_on).to_json()
            self.emit(
                None,
                f"Batch job {self.state.job_id}: nothing more can run: {Blocked.from_json(self.state.blocked).named()} "
                f"wait{'s' if len(blocked) == 1 else ''} on failed tasks ({', '.join(waited_on)})",
            )

    def all_tasks_done(self) -> bool:
        counts = self.state.counts
        # A job watched from outside (the sensor) has no known size: it needs at least one task.
        expected = self.state.expected_tasks if self.state.expected_tasks is not None else 1
        return counts is not None and tasks_done(TaskCounts.from_json(counts), expected)

    def job_over(self) -> bool:
        """Every task finished (and the job's release task ran), the job ended (terminated, hit its wall clock)
        with tasks left, or nothing more can run."""
        state = self.state
        if state.blocked is not None:
            return True
        if state.has_release:
            return state.job_state in RELEASED_STATES
        return self.all_tasks_done() or state.job_state in TERMINAL_JOB_STATES

    # -- output (:mod:`.following`) --------------------------------------------------------------------
    def _tasks_to_refresh(self) -> list[str]:
        return self.output.tasks_to_refresh()

    def unfinished_output(self) -> bool:
        """A finished streamed task whose output is not shown to the end yet."""
        return self.output.unfinished_output()

    def read_schedules(self, now: float) -> dict[ReadKey, ReadSchedule]:
        """The reads this watch wants, for a scheduler that grants reads to many watches (see
        :meth:`.following.OutputFollower.read_schedules`); :meth:`look` or :meth:`read` makes those granted."""
        return self.output.read_schedules(now)

    def _granted_output(self, now: float, grants: Collection[ReadKey]) -> Step[bool]:
        """The granted reads, and a finished task's output to its end; True once the job is over and its output
        shown to the end. ``output.requests`` counts the requests they took."""
        self.output.requests = 0
        try:
            if self.output.stream_output:
                yield from self.output.read_granted(now, grants)
        finally:
            self.output.save_cursors()
        return self.job_over() and not self.unfinished_output()

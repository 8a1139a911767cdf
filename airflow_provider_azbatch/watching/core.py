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
- for each streamed task that runs: one file listing (sizes of stdout and stderr), then one ranged read
  per stream that grew, of the new bytes only. A task whose output grew is listed every poll; one whose
  output stays quiet less often: every poll for ``QUIET_LOOKS_PER_LEVEL`` quiet looks, then twice as far
  apart after every ``QUIET_LOOKS_PER_LEVEL`` more, never more than ``idle_stream_seconds`` apart (the
  longest a quiet stream's new output waits before it is seen) - as far as the look budget the watch
  shares with others allows (see :mod:`.budget`).

Which output is shown, for jobs of any size: stdout and stderr of the ``streamed`` tasks (the first
``max_streamed_tasks`` submitted); for failed tasks, the last lines of stderr in the failure report.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.reads import Call
from airflow_provider_azbatch.model.records import (
    STDOUT,
    STREAMS,
    TERMINAL_JOB_STATES,
    ActiveTask,
    FailedTask,
    FileChunk,
    FileInfo,
    JobStatus,
    NodeTimes,
    SideTaskRun,
    TaskCounts,
    epoch_seconds,
)
from airflow_provider_azbatch.model.verdict import RELEASED_STATES, tasks_done
from airflow_provider_azbatch.watching import idle_time
from airflow_provider_azbatch.watching.blocking import (
    Blocked,
    blocked_by_dependencies,
    blocked_state,
    preparation_blocks_all,
)
from airflow_provider_azbatch.watching.budget import Unlimited
from airflow_provider_azbatch.watching.calls import Step, ask, raise_first_error
from airflow_provider_azbatch.watching.pool_health import PoolProblem, check_pool
from airflow_provider_azbatch.watching.preemption import (
    SpotFallbackDue,
    check_fallback,
    fallback_available,
    track_attempts,
)
from airflow_provider_azbatch.watching.reads import QUIET_READS_PER_LEVEL, ReadSchedule, quiet_wait
from airflow_provider_azbatch.watching.state import StreamCursor, WatchState
from airflow_provider_azbatch.watching.streams import Tail

# Even when task counts do not move, look at the job itself this often.
JOB_STATE_CHECK_SECONDS = 60.0
# A pool made for the job: its nodes are listed when the counts move and at least this often (its node
# time is what the job cost, and the pool goes with the job).
NODE_SAMPLE_SECONDS = 60.0
# Failed job preparation runs kept in the state (where they failed, their exit code, where their output is).
NAMED_PREPARATION_FAILURES = 3
# A quiet stream is listed every poll for this many looks, then half as often, and so on.
QUIET_LOOKS_PER_LEVEL = QUIET_READS_PER_LEVEL
DEFAULT_IDLE_STREAM_SECONDS = 30.0
DEFAULT_PARTIAL_LINE_SECONDS = 10.0

# Shown in a stream's output where a retried task's new output file starts.
RESTART_NOTICE = "--- the task started over (retry); its output follows anew ---"

# (Batch task id, or None for lines about the job; the line).
Emit = Callable[[str | None, str], None]

# A read a shared scheduler grants a watch: a stream (task id, file name), or ``TASK_STATES``.
ReadKey = tuple[str, str]
# The read of the states of streamed tasks not started yet (their output can be read once they run).
TASK_STATES: ReadKey = ("", "task states")


class LookBudget(Protocol):
    def grant(self, wanted: int, now: float) -> int: ...


def format_progress(job_id: str, counts: TaskCounts, expected: int | None) -> str:
    total = f" of {expected}" if expected is not None else ""
    return (
        f"Batch job {job_id}: {counts.active} active, {counts.running} running, "
        f"{counts.succeeded} succeeded, {counts.failed} failed{total}"
    )


def output_prefix(task_id: str, stream: str) -> str:
    return f"[{task_id}]" if stream == STDOUT else f"[{task_id}:stderr]"


@dataclass
class _Look:
    """When a streamed task's files are listed next."""

    next_at: float = 0.0
    quiet: int = 0
    looked: bool = False

    @property
    def active(self) -> bool:
        """Its output grew at the last look: looked at every poll, whatever the budget."""
        return self.looked and self.quiet == 0

    def after(self, grew: bool, now: float, poll_interval: float, cap: float) -> None:
        self.looked = True
        self.quiet = 0 if grew else self.quiet + 1
        self.next_at = now + quiet_wait(self.quiet, poll_interval, cap) if self.quiet else now


class JobWatcher:
    """What to ask the service next about one job, and what the answers mean."""

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
        self.stream_output = stream_output
        self.poll_interval = poll_interval
        self.max_read_bytes = max_read_bytes
        self.idle_stream_seconds = idle_stream_seconds
        self.partial_line_seconds = partial_line_seconds
        self.look_budget: LookBudget = look_budget or Unlimited()
        # Scheduling of this process's own looks: not part of the state (a resumed watch looks at once).
        self.last_job_check: float | None = None
        self.last_pool_check: float | None = None
        self.last_node_sample: float | None = None
        # Something else reports a change of the job's state (a trigger's account view, while it looks): no
        # periodic read of the job for that.
        self.job_state_watched = False
        # The task counts at the last look at the job's dependencies (looked at again when they move).
        self._dependencies_seen_at: dict[str, int] | None = None
        self._tails: dict[tuple[str, str], Tail] = {}
        self._looks: dict[str, _Look] = {}
        # When each followed stream is read next, for a scheduler that grants reads (see read_schedules).
        self._schedules: dict[ReadKey, ReadSchedule] = {}
        # Whether the counts moved at the last look at the job; the output requests of the last poll.
        self.last_look_moved = False
        self.output_requests = 0
        self._saved: dict[tuple[str, str], tuple[int, str | None, bool]] = {}

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
        """The granted output reads alone, between two looks at the job (see :meth:`look`)."""
        return (yield from self._granted_output(now, grants))

    def _look_at_job(self, now: float) -> Step[None]:
        state = self.state
        check_job = self._job_check_due(now)
        calls: list[Call[Any]] = [read.get_task_counts(state.job_id)]
        if check_job:
            calls.append(read.get_job_status(state.job_id))
        results = yield calls
        raise_first_error(results)
        moved = self._observe_counts(results[0])
        self.last_look_moved = moved
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
            self.last_pool_check = now
            assert state.pool_id is not None
            self._observe_pool((yield from check_pool(state.pool_id)))
            if state.waits_for_preparation:
                yield from self._check_preparation(state.pool_id)
        if self._node_sample_due(now, moved):
            self.last_node_sample = now
            assert state.pool_id is not None
            (nodes,) = yield from ask(read.list_pool_nodes(state.pool_id))
            self.observe_nodes(nodes, now)
            idle_time.sample(state, state.pool_id, nodes, now)
        refresh = self._tasks_to_refresh()
        if refresh and (moved or any(state.task_states.get(task) is None for task in refresh)):
            (states,) = yield from ask(read.list_task_states(state.job_id, tuple(refresh)))
            state.task_states.update(states)

    def _output_then_over(self, now: float) -> Step[bool]:
        """Show the streamed tasks' new output; True once the job is over and its output shown to the end."""
        try:
            yield from self._follow_output(now)
        finally:
            self._save_cursors()
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

    def waiting_for_nodes(self) -> bool:
        """Tasks wait and none runs (for nodes, or for a preparation task): looked at every poll."""
        counts = self.state.counts
        return counts is not None and counts["active"] > 0 and counts["running"] == 0

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

    def _check_preparation(self, pool_id: str) -> Step[None]:
        """Tasks wait and none runs: did the job preparation task fail on every node of the pool?"""
        state = self.state
        runs, pool = yield from ask(read.list_preparation_status(state.job_id), read.get_pool_snapshot(pool_id))
        current = (pool.current_dedicated_nodes or 0) + (pool.current_low_priority_nodes or 0) if pool else 0
        failed: list[SideTaskRun] = preparation_blocks_all(runs, current)
        if not failed:
            return
        (active,) = yield from ask(read.list_active_dependencies(state.job_id))
        ids = [task.id for task in active]
        state.blocked = blocked_state(
            "preparation", ids, len(ids), nodes=[run.to_json() for run in failed[:NAMED_PREPARATION_FAILURES]]
        ).to_json()
        self.emit(
            None,
            f"Batch job {state.job_id}: nothing more can run: its job preparation task failed on every node of "
            f"pool {pool_id} ({len(failed)})",
        )

    def _pool_check_due(self, now: float) -> bool:
        """Tasks wait and none runs: is the pool still able to give them nodes? (checked now and then)"""
        state = self.state
        return (
            self.waiting_for_nodes()
            and state.pool_id is not None
            and state.job_state not in TERMINAL_JOB_STATES
            and (self.last_pool_check is None or now - self.last_pool_check >= state.pool_check_interval)
        )

    def _node_sample_due(self, now: float, moved: bool) -> bool:
        """A pool made for the job: when the counts move and every minute (its node time is what the job cost);
        any pool: as its idle time is sampled (see :mod:`.idle_time`)."""
        state = self.state
        if state.pool_id is None or state.job_state in TERMINAL_JOB_STATES:
            return False
        if state.auto_pool_vm_size is not None and (
            moved or self.last_node_sample is None or now - self.last_node_sample >= NODE_SAMPLE_SECONDS
        ):
            return True
        return idle_time.sample_due(state, state.pool_id, now, moved)

    def observe_nodes(self, nodes: list[NodeTimes] | None, now: float) -> None:
        """Record the nodes of a pool made for the job: new ones with their allocation time; those no longer listed
        have left."""
        if self.state.auto_pool_vm_size is None:
            return
        seen = datetime.fromtimestamp(now, timezone.utc).isoformat()
        listed = {node.id for node in nodes or []}
        for node in nodes or []:
            record = self.state.nodes.setdefault(
                node.id, {"dedicated": node.dedicated, "allocated": node.allocated or seen, "gone": False}
            )
            record["seen"] = seen
        for node_id, record in self.state.nodes.items():
            if node_id not in listed:
                record["gone"] = True

    def _observe_pool(self, problem: PoolProblem | None) -> None:
        """Raise the problem if it is certain, or seen at two looks in a row."""
        if problem is None:
            self.state.pool_suspect = False
            return
        if problem.allocation and fallback_available(self.state):
            raise SpotFallbackDue(f"the pool cannot get its Spot nodes: {problem}")
        if problem.certain or self.state.pool_suspect:
            raise problem
        self.state.pool_suspect = True

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

    # -- output -------------------------------------------------------------------------------------
    def _tasks_to_refresh(self) -> list[str]:
        """Streamed tasks whose state matters (those not yet finished and shown to the end)."""
        if not self.stream_output:
            return []
        return [task for task in self.state.streamed if not self._flushed(task)]

    def _flushed(self, task: str) -> bool:
        return self.state.task_states.get(task) == "completed" and all(
            self._tail(task, stream).cursor.done for stream in STREAMS
        )

    def unfinished_output(self) -> bool:
        """A finished streamed task whose output is not shown to the end yet."""
        if not self.stream_output:
            return False
        return any(
            self.state.task_states.get(task) == "completed" and not self._flushed(task) for task in self.state.streamed
        )

    def _tail(self, task: str, stream: str) -> Tail:
        key = (task, stream)
        tail = self._tails.get(key)
        if tail is None:
            tail = self._tails[key] = Tail(self.state.cursor(task, stream))
        return tail

    def _save_cursors(self) -> None:
        # Only cursors that moved: a new dict per stream and poll, kept until the next, would be old enough
        # for the garbage collector's oldest generation (full collections are what stall a triggerer).
        for (task, stream), tail in self._tails.items():
            cursor = tail.cursor
            mark = (cursor.offset, cursor.created, cursor.done)
            key = (task, stream)
            if self._saved.get(key) == mark:
                continue
            self._saved[key] = mark
            if cursor != StreamCursor() or f"{task}/{stream}" in self.state.cursors:
                self.state.set_cursor(task, stream, cursor)

    def _show(self, task: str, stream: str, lines: list[str]) -> None:
        prefix = output_prefix(task, stream)
        for line in lines:
            self.emit(task, f"{prefix} {line}")

    def _follow_output(self, now: float) -> Step[None]:
        """The output due by this watch's own cadence (:meth:`step`): every running task whose output grew at
        its last look, the quiet and new ones as far as the look budget allows, finished ones to the end."""
        if not self.stream_output:
            return
        state = self.state
        due: list[tuple[str, bool]] = []
        budgeted: list[tuple[float, str]] = []
        for task in state.streamed:
            task_state = state.task_states.get(task)
            if task_state not in ("running", "completed") or self._flushed(task):
                continue
            look = self._looks.setdefault(task, _Look())
            if task_state == "completed" or (look.active and now >= look.next_at):
                due.append((task, task_state == "completed"))
            elif now >= look.next_at:
                # Never looked at (first) or quiet (longest due first): within the shared budget.
                budgeted.append((look.next_at if look.looked else float("-inf"), task))
        budgeted.sort()
        granted = self.look_budget.grant(len(budgeted), now)
        due += [(task, False) for _, task in budgeted[:granted]]
        yield from self._read_files(now, due, [])

    # -- output read as a shared scheduler grants it ------------------------------------------------
    def read_schedules(self, now: float) -> dict[ReadKey, ReadSchedule]:
        """The reads this watch wants, for a scheduler that grants reads to many watches (a trigger's account
        view): one per followed stream of a running task, and ``TASK_STATES`` while streamed tasks have not
        started (whose output can only be read once they run). Each says when it may be read next and how
        urgently (:mod:`.reads`); the scheduler grants some, and :meth:`look` or :meth:`read` makes them."""
        wanted: set[ReadKey] = set()
        if self.stream_output:
            state = self.state
            for task in state.streamed:
                if state.task_states.get(task) == "running" and not self._flushed(task):
                    wanted.update((task, stream) for stream in STREAMS if not self._tail(task, stream).cursor.done)
            if self._not_started():
                wanted.add(TASK_STATES)
        for key in self._schedules.keys() - wanted:
            del self._schedules[key]
        for key in wanted - self._schedules.keys():
            self._schedules[key] = ReadSchedule(eligible=now)
        return self._schedules

    def _not_started(self) -> list[str]:
        return [
            task
            for task in self._tasks_to_refresh()
            if self.state.task_states.get(task) not in ("running", "completed")
        ]

    def _granted_output(self, now: float, grants: Collection[ReadKey]) -> Step[bool]:
        """The granted reads, and a finished task's output to its end; True once the job is over and its output
        shown to the end. ``output_requests`` counts the requests they took."""
        self.output_requests = 0
        try:
            if self.stream_output:
                yield from self._read_granted(now, grants)
        finally:
            self._save_cursors()
        return self.job_over() and not self.unfinished_output()

    def _read_granted(self, now: float, grants: Collection[ReadKey]) -> Step[None]:
        state = self.state
        if TASK_STATES in grants:
            waiting = self._not_started()
            if waiting:
                self.output_requests += 1
                (states,) = yield from ask(read.list_task_states(state.job_id, tuple(waiting)))
                state.task_states.update(states)
                started = sum(1 for task in waiting if states.get(task) in ("running", "completed"))
                schedule = self._schedules.get(TASK_STATES)
                if schedule is not None:
                    schedule.read(started, now, self.poll_interval, self.idle_stream_seconds)
                    schedule.priority = schedule.eligible  # in turn: a started task's output waits for it
        listed: list[tuple[str, bool]] = [
            (task, True)
            for task in state.streamed
            if state.task_states.get(task) == "completed" and not self._flushed(task)
        ]
        by_task: dict[str, list[str]] = {}
        for key in grants:
            task, stream = key
            if key != TASK_STATES and state.task_states.get(task) == "running" and not self._flushed(task):
                by_task.setdefault(task, []).append(stream)
        direct: list[tuple[str, str, tuple[int, int]]] = []
        for task, streams in by_task.items():
            spans = [(stream, self._tail(task, stream).direct_range(self.max_read_bytes)) for stream in streams]
            growing = all(self._schedules.get((task, stream), ReadSchedule()).rate > 0 for stream in streams)
            if any(span is None for _, span in spans) or (len(streams) > 1 and not growing):
                listed.append((task, False))  # one listing looks at both streams
            else:
                direct += [(task, stream, span) for stream, span in spans if span is not None]
        yield from self._read_files(now, listed, direct)

    def _read_files(
        self, now: float, listed: list[tuple[str, bool]], direct: list[tuple[str, str, tuple[int, int]]]
    ) -> Step[None]:
        """Read new output: list the files of the ``listed`` tasks (final: the task finished, read to the end)
        and read what grew; read ``direct`` streams straight from where they were read to (see :mod:`.streams`)."""
        state = self.state
        errors: list[BaseException] = []
        reads: list[tuple[str, str, bool, Call[Any]]] = []
        uploaded: list[tuple[str, str]] = []
        calls: list[Call[Any]] = [read.list_task_files(state.job_id, task) for task, _ in listed]
        calls += [read.read_task_file_from(state.job_id, task, stream, *span) for task, stream, span in direct]
        if calls:
            self.output_requests += len(calls)
            answers = yield calls
            for (task, final), listing in zip(listed, answers[: len(listed)], strict=True):
                if isinstance(listing, BaseException):
                    errors.append(listing)
                    continue
                grew = False
                for stream in STREAMS:
                    tail = self._tail(task, stream)
                    if tail.cursor.done:
                        continue
                    info = listing.get(stream) if listing is not None else None
                    if info is None:
                        if final and listing is None and state.log_location:
                            uploaded.append((task, stream))  # the node is gone: read what the task uploaded
                        elif final:
                            self._show(task, stream, tail.finish())
                        self._read_at(task, stream, 0, now)
                        continue
                    new = self._plan_read(task, stream, tail, info, final, reads, uploaded=False)
                    self._read_at(task, stream, new, now)
                    grew = grew or new > 0
                self._looks.setdefault(task, _Look()).after(grew, now, self.poll_interval, self.idle_stream_seconds)
            for (task, stream, span), chunk in zip(direct, answers[len(listed) :], strict=True):
                if isinstance(chunk, BaseException):
                    errors.append(chunk)
                    continue
                tail = self._tail(task, stream)
                lines = None if chunk is None else self._take_direct(tail, span, chunk, now)
                if lines is None:
                    tail.unknown()  # gone, or not the file read so far: the next read lists the task's files
                    self._read_at(task, stream, 0, now)
                    continue
                self._read_at(task, stream, tail.read_to - span[0] - 1, now)
                self._show(task, stream, lines)
        if uploaded:
            location = state.log_location
            assert location is not None  # a task is only read from its uploaded logs when there are some
            self.output_requests += len(uploaded)
            sizes = yield [read.get_uploaded_log_size(location, state.job_id, task, s) for task, s in uploaded]
            for (task, stream), size in zip(uploaded, sizes, strict=True):
                tail = self._tail(task, stream)
                if isinstance(size, BaseException):
                    errors.append(size)
                elif size is None:
                    self._show(task, stream, tail.finish())
                else:
                    self._plan_read(task, stream, tail, FileInfo(size, tail.cursor.created), True, reads, True)
        if reads:
            self.output_requests += len(reads)
            answers = yield [call for *_, call in reads]
            for (task, stream, final, _), data in zip(reads, answers, strict=True):
                if isinstance(data, BaseException):
                    errors.append(data)
                    continue
                tail = self._tail(task, stream)
                if data is None:  # vanished between listing and reading
                    if final:
                        self._show(task, stream, tail.finish())
                    continue
                self._show(task, stream, tail.take(data, now, final=final))
        for (task, stream), tail in self._tails.items():
            self._show(task, stream, tail.flush_if_stale(now, self.partial_line_seconds))
        if errors:
            raise errors[0]

    def _take_direct(self, tail: Tail, span: tuple[int, int], chunk: FileChunk, now: float) -> list[str] | None:
        """The lines a direct read completed; None if its answer is not the file read so far."""
        created = tail.cursor.created
        if chunk.created is not None and created is not None and _whole_seconds(created) != chunk.created:
            return None  # another file: the task started over
        return tail.take_direct(span, chunk.data, now)  # None if it ends before the byte read last, or differs

    def _read_at(self, task: str, stream: str, new_bytes: int, now: float) -> None:
        schedule = self._schedules.get((task, stream))
        if schedule is not None:
            schedule.read(max(new_bytes, 0), now, self.poll_interval, self.idle_stream_seconds)

    def _plan_read(
        self,
        task: str,
        stream: str,
        tail: Tail,
        info: FileInfo,
        final: bool,
        reads: list[tuple[str, str, bool, Call[Any]]],
        uploaded: bool,
    ) -> int:
        """Queue a read of the file's new bytes; how many there are."""
        if tail.observe(info):
            self.emit(task, f"{output_prefix(task, stream)} {RESTART_NOTICE}")
        span = tail.next_range(self.max_read_bytes)
        if span is None:
            if final:
                self._show(task, stream, tail.finish())
            return 0
        location = self.state.log_location
        if uploaded:
            assert location is not None  # only a task whose logs were uploaded is read from them
            reads.append(
                (task, stream, final, read.read_uploaded_log(location, self.state.job_id, task, stream, *span))
            )
        else:
            reads.append((task, stream, final, read.read_task_file(self.state.job_id, task, stream, *span)))
        return info.size - tail.read_to


def _whole_seconds(iso: str) -> int | None:
    seconds = epoch_seconds(iso)
    return int(seconds) if seconds is not None else None

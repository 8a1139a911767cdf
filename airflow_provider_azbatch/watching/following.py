"""Following the streamed tasks' output: which files to list and read, and the lines they give. No I/O.

For each streamed task that runs: one file listing (sizes of stdout and stderr), then one ranged read per stream
that grew, of the new bytes only. A task whose output grew is listed every poll; one whose output stays quiet less
often: every poll for ``QUIET_LOOKS_PER_LEVEL`` quiet looks, then twice as far apart after every
``QUIET_LOOKS_PER_LEVEL`` more, never more than ``idle_stream_seconds`` apart (the longest a quiet stream's new
output waits before it is seen) - as far as the look budget the watch shares with others allows (see
:mod:`.budget`). A scheduler that grants reads to many watches (a trigger's account view) may instead read a
stream straight from where it was read to (see :mod:`.streams`, :meth:`OutputFollower.read_schedules`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.reads import Call
from airflow_provider_azbatch.model.records import STDOUT, STREAMS, FileChunk, FileInfo, epoch_seconds
from airflow_provider_azbatch.watching.calls import Step, ask
from airflow_provider_azbatch.watching.reads import QUIET_READS_PER_LEVEL, ReadSchedule, quiet_wait
from airflow_provider_azbatch.watching.state import StreamCursor, WatchState
from airflow_provider_azbatch.watching.streams import Tail

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

# A queued read of a file's new bytes: (task, stream, final, the call).
_Read = tuple[str, str, bool, Call[Any]]
# A direct read: (task, stream, the byte range).
_Direct = tuple[str, str, tuple[int, int]]


class LookBudget(Protocol):
    def grant(self, wanted: int, now: float) -> int: ...


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


@dataclass(eq=False)
class OutputFollower:
    """What to read next of a job's streamed tasks' output, and the lines the answers give (to ``emit``).

    ``requests`` counts the output requests made since a caller last set it to 0.
    """

    state: WatchState
    emit: Emit
    _: KW_ONLY
    stream_output: bool
    poll_interval: float
    max_read_bytes: int
    idle_stream_seconds: float
    partial_line_seconds: float
    look_budget: LookBudget
    requests: int = 0
    _tails: dict[tuple[str, str], Tail] = field(default_factory=dict, init=False)
    _looks: dict[str, _Look] = field(default_factory=dict, init=False)
    # When each followed stream is read next, for a scheduler that grants reads (see read_schedules).
    _schedules: dict[ReadKey, ReadSchedule] = field(default_factory=dict, init=False)
    _saved: dict[tuple[str, str], tuple[int, str | None, bool]] = field(default_factory=dict, init=False)

    # -- where the output stands ----------------------------------------------------------------------
    def tasks_to_refresh(self) -> list[str]:
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

    def _not_started(self) -> list[str]:
        return [
            task for task in self.tasks_to_refresh() if self.state.task_states.get(task) not in ("running", "completed")
        ]

    def _tail(self, task: str, stream: str) -> Tail:
        key = (task, stream)
        tail = self._tails.get(key)
        if tail is None:
            tail = self._tails[key] = Tail(self.state.cursor(task, stream))
        return tail

    def save_cursors(self) -> None:
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

    # -- output due by the watch's own cadence ----------------------------------------------------------
    def follow(self, now: float) -> Step[None]:
        """The output due by this watch's own cadence: every running task whose output grew at its last look,
        the quiet and new ones as far as the look budget allows, finished ones to the end."""
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

    # -- output read as a shared scheduler grants it ------------------------------------------------------
    def read_schedules(self, now: float) -> dict[ReadKey, ReadSchedule]:
        """The reads this watch wants, for a scheduler that grants reads to many watches (a trigger's account
        view): one per followed stream of a running task, and ``TASK_STATES`` while streamed tasks have not
        started (whose output can only be read once they run). Each says when it may be read next and how
        urgently (:mod:`.reads`); the scheduler grants some, and :meth:`read_granted` makes them."""
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

    def read_granted(self, now: float, grants: Collection[ReadKey]) -> Step[None]:
        """The granted reads, and a finished task's output to its end."""
        state = self.state
        if TASK_STATES in grants:
            yield from self._read_task_states(now)
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
        direct: list[_Direct] = []
        for task, streams in by_task.items():
            spans = [(stream, self._tail(task, stream).direct_range(self.max_read_bytes)) for stream in streams]
            growing = all(self._schedules.get((task, stream), ReadSchedule()).rate > 0 for stream in streams)
            if any(span is None for _, span in spans) or (len(streams) > 1 and not growing):
                listed.append((task, False))  # one listing looks at both streams
            else:
                direct += [(task, stream, span) for stream, span in spans if span is not None]
        yield from self._read_files(now, listed, direct)

    def _read_task_states(self, now: float) -> Step[None]:
        """The states of the streamed tasks not started yet (granted as ``TASK_STATES``)."""
        waiting = self._not_started()
        if not waiting:
            return
        self.requests += 1
        (states,) = yield from ask(read.list_task_states(self.state.job_id, tuple(waiting)))
        self.state.task_states.update(states)
        started = sum(1 for task in waiting if states.get(task) in ("running", "completed"))
        schedule = self._schedules.get(TASK_STATES)
        if schedule is not None:
            schedule.read(started, now, self.poll_interval, self.idle_stream_seconds)
            schedule.priority = schedule.eligible  # in turn: a started task's output waits for it

    # -- reading ----------------------------------------------------------------------------------------
    def _read_files(self, now: float, listed: list[tuple[str, bool]], direct: list[_Direct]) -> Step[None]:
        """Read new output: list the files of the ``listed`` tasks (final: the task finished, read to the end)
        and read what grew; read ``direct`` streams straight from where they were read to (see :mod:`.streams`)."""
        state = self.state
        errors: list[BaseException] = []
        reads: list[_Read] = []
        uploaded: list[tuple[str, str]] = []
        calls: list[Call[Any]] = [read.list_task_files(state.job_id, task) for task, _ in listed]
        calls += [read.read_task_file_from(state.job_id, task, stream, *span) for task, stream, span in direct]
        if calls:
            self.requests += len(calls)
            answers = yield calls
            for (task, final), listing in zip(listed, answers[: len(listed)], strict=True):
                if isinstance(listing, BaseException):
                    errors.append(listing)
                else:
                    self._take_listing(task, final, listing, now, reads, uploaded)
            self._take_direct_reads(direct, answers[len(listed) :], now, errors)
        if uploaded:
            location = state.log_location
            assert location is not None  # a task is only read from its uploaded logs when there are some
            self.requests += len(uploaded)
            sizes = yield [read.get_uploaded_log_size(location, state.job_id, task, s) for task, s in uploaded]
            self._take_uploaded_sizes(uploaded, sizes, reads, errors)
        if reads:
            self.requests += len(reads)
            answers = yield [call for *_, call in reads]
            self._take_reads(reads, answers, now, errors)
        for (task, stream), tail in self._tails.items():
            self._show(task, stream, tail.flush_if_stale(now, self.partial_line_seconds))
        if errors:
            raise errors[0]

    def _take_listing(
        self,
        task: str,
        final: bool,
        listing: dict[str, FileInfo] | None,
        now: float,
        reads: list[_Read],
        uploaded: list[tuple[str, str]],
    ) -> None:
        """A task's file listing (None: its node is gone): queue reads of what grew."""
        grew = False
        for stream in STREAMS:
            tail = self._tail(task, stream)
            if tail.cursor.done:
                continue
            info = listing.get(stream) if listing is not None else None
            if info is None:
                if final and listing is None and self.state.log_location:
                    uploaded.append((task, stream))  # the node is gone: read what the task uploaded
                elif final:
                    self._show(task, stream, tail.finish())
                self._read_at(task, stream, 0, now)
                continue
            new = self._plan_read(task, stream, tail, info, final, reads, uploaded=False)
            self._read_at(task, stream, new, now)
            grew = grew or new > 0
        self._looks.setdefault(task, _Look()).after(grew, now, self.poll_interval, self.idle_stream_seconds)

    def _take_direct_reads(
        self, direct: list[_Direct], chunks: list[Any], now: float, errors: list[BaseException]
    ) -> None:
        for (task, stream, span), chunk in zip(direct, chunks, strict=True):
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

    def _take_uploaded_sizes(
        self, uploaded: list[tuple[str, str]], sizes: list[Any], reads: list[_Read], errors: list[BaseException]
    ) -> None:
        for (task, stream), size in zip(uploaded, sizes, strict=True):
            tail = self._tail(task, stream)
            if isinstance(size, BaseException):
                errors.append(size)
            elif size is None:
                self._show(task, stream, tail.finish())
            else:
                self._plan_read(task, stream, tail, FileInfo(size, tail.cursor.created), True, reads, True)

    def _take_reads(self, reads: list[_Read], answers: list[Any], now: float, errors: list[BaseException]) -> None:
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
        reads: list[_Read],
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

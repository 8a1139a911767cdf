"""``airflow azbatch logs``: the output of a job's tasks, from their nodes or, once a node is gone, from Blob.

One task: its stdout (or ``--stderr``) as it is, for pipes. Every task (no TASK given): both streams of
each task, lines prefixed ``[task]`` and ``[task:stderr]`` as in the operator's log.

``--follow`` first shows what the files hold up to their last complete line, then hands the read
positions to the watch core the operator uses (:class:`~airflow_provider_azbatch.watching.core.JobWatcher`):
new bytes only, each line once, a retried task's new output announced, an unfinished line shown after
``[azbatch] partial_line_seconds``; it stops once the followed tasks have ended and their output is shown
to the end (or the job ended).
"""

from __future__ import annotations

import itertools
import sys
import time
from argparse import Namespace
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow.utils.cli import suppress_logs_and_warning
from airflow.utils.providers_configuration_loader import providers_configuration_loaded

from airflow_provider_azbatch import config
from airflow_provider_azbatch.cli.command import CliError, UsageError, note, run
from airflow_provider_azbatch.cli.line_filters import LineFilter, compile_grep
from airflow_provider_azbatch.cli.targets import job_id_of
from airflow_provider_azbatch.cli.times import time_window
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.model.lines import MAX_LINE_BYTES, last_lines
from airflow_provider_azbatch.model.records import STDERR, STDOUT, STREAMS, FileInfo
from airflow_provider_azbatch.watching.core import RESTART_NOTICE, JobWatcher, output_prefix
from airflow_provider_azbatch.watching.state import StreamCursor, WatchState
from airflow_provider_azbatch.watching.streams import Tail

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

# The first read from the end of a file for --tail; doubled until enough lines are in.
TAIL_CHUNK_BYTES = 64 * 1024


@suppress_logs_and_warning
@providers_configuration_loaded
def logs(args: Namespace) -> None:
    """Show (or follow) the output of a job's tasks."""
    run(args, _logs)


# -- where a task's output can be read ---------------------------------------------------------------------
@dataclass
class Source:
    """One output file of one task as it is now: on the task's node, or uploaded to Blob."""

    size: int
    read: Callable[[int, int], bytes | None]
    created: str | None = None
    uploaded: bool = False


def locate(
    hook: AzureBatchHook, job_id: str, task_id: str, stream: str, location: LogLocation | None
) -> tuple[Source | None, bool]:
    """The file, or (None, gone): gone when the task's node no longer has it and nothing was uploaded."""
    listing = hook.list_task_files(job_id, task_id)
    if listing is not None:
        info = listing.get(stream)
        if info is None:
            return None, False
        return Source(
            info.size, lambda start, end: hook.read_task_file(job_id, task_id, stream, start, end), info.created
        ), False
    if location is None:
        return None, True
    where = location.to_json()
    size = hook.get_uploaded_log_size(where, job_id, task_id, stream)
    if size is None:
        return None, True
    return Source(
        size,
        lambda start, end: hook.read_uploaded_log(where, job_id, task_id, stream, start, end),
        uploaded=True,
    ), False


@dataclass
class ForwardReader:
    """Every line of a source from the start, ``max_bytes`` per request; ``offset``: after the last line."""

    source: Source
    max_bytes: int
    # Only complete lines (a followed file goes on growing: its unfinished last line is the watch's).
    complete_only: bool = False
    offset: int = 0

    def lines(self) -> Iterator[str]:
        tail = Tail(StreamCursor())
        tail.observe(FileInfo(self.source.size))
        final = not self.complete_only
        while (span := tail.next_range(self.max_bytes)) is not None:
            data = self.source.read(*span)
            if not data:  # gone, or shorter than listed, meanwhile
                break
            yield from tail.take(data, 0.0, final=final)
        if final:
            yield from tail.finish()
        self.offset = tail.cursor.offset


def read_last(source: Source, count: int, max_bytes: int, *, complete_only: bool) -> tuple[list[str], int]:
    """The last ``count`` lines, read from the end; and the offset after them."""
    end, start = source.size, source.size
    data = b""
    chunk = TAIL_CHUNK_BYTES
    while start > 0 and data.count(b"\n") <= count and len(data) < (count + 1) * MAX_LINE_BYTES:
        new_start = max(0, start - chunk)
        piece = source.read(new_start, start - 1)
        if piece is None:
            break
        data, start = piece + data, new_start
        chunk = min(chunk * 2, max(max_bytes, TAIL_CHUNK_BYTES))
    if complete_only:
        cut = data.rfind(b"\n") + 1
        data, end = data[:cut], start + cut
    return last_lines(data, count, trimmed=start > 0), end


# -- what is shown ---------------------------------------------------------------------------------------
@dataclass
class Printer:
    """Writes the lines that pass the filter: prefixed by task and stream, or as they are (one task)."""

    prefixed: bool
    streams: tuple[str, ...]
    line_filter: LineFilter = field(default_factory=LineFilter)
    lines_read: int = 0

    def offer(self, task: str, stream: str, line: str) -> None:
        self.lines_read += 1
        if self.line_filter.accepts((task, stream), line):
            self.write(task, stream, line)

    def write(self, task: str, stream: str, line: str) -> None:
        sys.stdout.write(f"{output_prefix(task, stream)} {line}\n" if self.prefixed else f"{line}\n")

    def show(
        self, task: str, stream: str, source: Source, tail: int | None, max_bytes: int, *, complete_only: bool = False
    ) -> int:
        """Show the file's lines (only the last ``tail`` that pass the filter); the offset after what was shown.

        ``complete_only``: leave an unfinished last line (the file is followed: the watch shows it).
        """
        if tail is not None and not self.line_filter.active:
            lines, end = read_last(source, tail, max_bytes, complete_only=complete_only)
            self.lines_read += len(lines)
            for line in lines:
                self.write(task, stream, line)
            return end
        reader = ForwardReader(source, max_bytes, complete_only=complete_only)
        if tail is None:
            for line in reader.lines():
                self.offer(task, stream, line)
        else:
            kept: deque[str] = deque(maxlen=tail)
            for line in reader.lines():
                self.lines_read += 1
                if self.line_filter.accepts((task, stream), line):
                    kept.append(line)
            for line in kept:
                self.write(task, stream, line)
        return reader.offset


# -- the command -----------------------------------------------------------------------------------------
@dataclass
class Request:
    job_id: str
    tasks: list[str]
    states: dict[str, str]
    location: LogLocation | None
    single: bool


def _positionals(args: Namespace) -> tuple[str | None, str | None]:
    """(JOB, TASK); with --dag-id/--task-id/--run-id the one positional argument is the TASK."""
    if (args.dag_id or args.task_id or args.run_id) and args.job_id and args.task is None:
        return None, args.job_id
    return args.job_id, args.task


def _request(hook: AzureBatchHook, args: Namespace) -> Request:
    job_arg, task_arg = _positionals(args)
    job_id = job_id_of(hook, args, job_arg)
    job = hook.get_job(job_id, select=["id", "state", "metadata"])
    if job is None:
        raise CliError(f"Batch job '{job_id}' does not exist in Batch account '{hook.account_name}'")
    location = LogLocation.from_metadata(job.metadata)
    if task_arg is not None:
        task = hook.get_task(job_id, task_arg, select=["id", "state"])
        if task is None:
            raise CliError(f"Batch job '{job_id}' has no task '{task_arg}'")
        return Request(job_id, [task.id], {task.id: enum_value(task.state)}, location, single=True)
    limit = args.max_tasks or config.get_int("max_streamed_tasks")
    listed = list(itertools.islice(hook.list_tasks(job_id, select=["id", "state"]), limit + 1))
    if len(listed) > limit:
        note(f"Showing the first {limit} tasks of Batch job {job_id} by id (--max-tasks to see more)")
        listed = listed[:limit]
    return Request(job_id, [t.id for t in listed], {t.id: enum_value(t.state) for t in listed}, location, single=False)


def _logs(hook: AzureBatchHook, args: Namespace) -> None:
    # Arguments first: a mistake is reported before any request.
    pattern = compile_grep(args.grep)
    since, until = time_window(args.since, args.until)
    if args.follow and until is not None:
        raise UsageError("--until cannot be used with --follow (followed output has no end to stop at)")
    poll_interval = args.poll_interval if args.poll_interval is not None else config.get_float("poll_interval")
    if poll_interval <= 0:
        raise UsageError(f"--poll-interval must be more than 0, got {args.poll_interval}")
    request = _request(hook, args)
    if args.stderr:
        streams: tuple[str, ...] = (STDERR,)
    else:
        streams = (STDOUT,) if request.single else STREAMS
    printer = Printer(not request.single, streams, LineFilter(pattern, since, until))
    if args.follow:
        _follow(hook, request, printer, args.tail, poll_interval, verbose=args.verbose)
    else:
        _show(hook, request, printer, args.tail)
    if printer.line_filter.windowed and printer.lines_read and not printer.line_filter.saw_time:
        note(
            "No line started with a time: --since/--until select lines by the ISO 8601 time they start with "
            "(as logging libraries write it)"
        )


def _show(hook: AzureBatchHook, request: Request, printer: Printer, tail: int | None) -> None:
    """Show what the tasks wrote; nothing to read at all is an error saying why (exit code 1)."""
    max_bytes = config.get_int("max_read_bytes")
    read = 0
    waiting = 0
    for task in request.tasks:
        if request.states[task] == "active":
            if request.single:
                raise CliError(
                    f"Task '{task}' of Batch job {request.job_id} has not started yet (active): no output so far "
                    "(--follow to wait for it)"
                )
            waiting += 1
            continue
        for stream in printer.streams:
            source, gone = locate(hook, request.job_id, task, stream, request.location)
            if source is None:
                if gone:
                    _report_gone(request, task, stream)
                continue
            printer.show(task, stream, source, tail, max_bytes)
            read += 1
    if not read:
        raise CliError(_why_nothing(request, printer.streams, waiting))


def _why_nothing(request: Request, streams: tuple[str, ...], waiting: int) -> str:
    job = f"Batch job {request.job_id}"
    if not request.tasks:
        return f"{job} has no tasks: no output to show"
    if waiting == len(request.tasks):
        return f"No task of {job} has started yet ({waiting} active): no output so far (--follow to wait for it)"
    files = " or ".join(streams)
    if request.single:
        return f"Task '{request.tasks[0]}' of {job} has no {files} file (yet): nothing to show"
    return f"No task of {job} has {files} to read (see the lines above): nothing to show"


def _report_gone(request: Request, task: str, stream: str) -> None:
    message = (
        f"The {stream} of task '{task}' is gone with its node, and Batch job {request.job_id} uploaded no logs to "
        "Blob (the operator does with output_container)"
    )
    if request.single:
        raise CliError(message)
    note(message)


def _follow(
    hook: AzureBatchHook, request: Request, printer: Printer, tail: int | None, poll_interval: float, *, verbose: bool
) -> None:
    from airflow_provider_azbatch.hooks.errors import describe_error
    from airflow_provider_azbatch.watching.drivers import run_sync
    from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS, OutagePolicy, WaitFailed
    from airflow_provider_azbatch.watching.pool_health import PoolProblem

    max_bytes = config.get_int("max_read_bytes")
    state = WatchState(
        job_id=request.job_id,
        streamed=list(request.tasks),
        log_location=request.location.to_json() if request.location else None,
        pool_check_interval=config.get_float("pool_check_interval"),
    )
    # What the files hold now, up to their last complete line; the watch goes on from there.
    for task in request.tasks:
        if request.states[task] == "active":
            continue
        for stream in STREAMS:
            source, _ = locate(hook, request.job_id, task, stream, request.location)
            if source is None:
                continue
            if stream in printer.streams:
                offset = printer.show(task, stream, source, tail, max_bytes, complete_only=True)
            else:
                offset = source.size  # not shown: only its growth is read (and dropped)
            state.set_cursor(task, stream, StreamCursor(offset, source.created))
    sys.stdout.flush()

    def emit(task: str | None, line: str) -> None:
        if task is None:
            if verbose:
                note(line)
            return
        for stream in STREAMS:
            prefix = f"{output_prefix(task, stream)} "
            if line.startswith(prefix):
                break
        else:  # pragma: no cover - the watch core prefixes every task line
            return
        if stream not in printer.streams:
            return
        text = line[len(prefix) :]
        if text == RESTART_NOTICE:
            printer.line_filter.restart((task, stream))
            printer.write(task, stream, text)
        else:
            printer.offer(task, stream, text)
        sys.stdout.flush()

    watcher = JobWatcher(
        state,
        emit,
        poll_interval=poll_interval,
        max_read_bytes=max_bytes,
        idle_stream_seconds=config.get_float("idle_stream_interval"),
        partial_line_seconds=config.get_float("partial_line_seconds"),
    )
    policy = OutagePolicy(request.job_id, DEFAULT_MAX_OUTAGE_SECONDS)
    while True:
        try:
            over = run_sync(watcher.step(time.time()), hook)
            policy.succeeded()
            delay = poll_interval
        except PoolProblem as problem:
            raise CliError(f"Batch job {request.job_id} cannot run: {problem}") from None
        except Exception as exc:
            try:
                delay = policy.delay_after(exc, time.monotonic())
            except WaitFailed as failed:
                raise CliError(str(failed)) from None
            note(f"Transient error from the Batch service ({describe_error(exc)}); retrying in {delay:.1f} s")
            over = False
        ended = all(state.task_states.get(task) == "completed" for task in request.tasks)
        if over or (ended and not watcher.unfinished_output()):
            return
        time.sleep(delay)

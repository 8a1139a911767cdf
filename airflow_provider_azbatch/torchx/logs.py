"""``torchx log``: a replica's stdout and stderr, from its node while it is there, then from what was kept.

TorchX asks for each replica in a thread of its own (``torchx log`` iterates one replica at a time, by role and
index, which the watch, following a job's tasks, does not); they share one :class:`AppFollower` per app, which
reads the app (the job, its task listing, a subtask listing per multi-node role: :mod:`.replicas`) at most once
per poll, whatever the number of replicas. Each replica then reads only the bytes its files grew by.

- Both streams (the default): with ``--tail``, each poll's new stdout lines, then its new stderr lines, so stderr
  (where torchrun and Python's logging write) shows as it is written; read at once, the two are merged by the
  time the replica's wrapper recorded for its output (``torchx-times.txt``), to the second.
- ``since``/``until`` select lines by that record too (lines read live count as written when read).
- Polls, backoff and lines are the watch's: a replica's stream that stays quiet is read less often (the watch's
  read schedule, :mod:`airflow_provider_azbatch.watching.reads`, up to ``[azbatch] idle_stream_interval``), a
  transient error of the service is waited out as the watch waits it out
  (:class:`~airflow_provider_azbatch.watching.outages.OutagePolicy`), and bytes become lines as the watch's
  stream tails make them (:class:`~airflow_provider_azbatch.watching.streams.Tail`).
- Output that can never be read (its node is gone and nothing was kept) raises :class:`OutputGone`, saying
  where it was and why it was not kept: the command exits non-zero, as ``airflow azbatch logs`` does.
"""

from __future__ import annotations

import heapq
import math
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from airflow_provider_azbatch.model.records import STDERR, STDOUT
from airflow_provider_azbatch.torchx.app import App, Replica
from airflow_provider_azbatch.torchx.files import Files, read_whole
from airflow_provider_azbatch.torchx.node import TIMES_FILE
from airflow_provider_azbatch.torchx.records import Times, epoch, within
from airflow_provider_azbatch.torchx.replicas import AppReader
from airflow_provider_azbatch.watching.reads import ReadSchedule
from airflow_provider_azbatch.watching.state import StreamCursor
from airflow_provider_azbatch.watching.streams import Tail

if TYPE_CHECKING:
    from airflow_provider_azbatch.watching.outages import OutagePolicy

# Bytes per read request.
CHUNK_BYTES = 4 * 1024 * 1024
# Seconds between polls of a followed app (one read of the app per poll, for all its replicas).
POLL_SECONDS = 2.0
# A time index is a line a second: a day's is about 2 MB.
TIMES_BYTES = 16 * 1024 * 1024
NAMES = {"stdout": (STDOUT,), "stderr": (STDERR,)}
# (when it was written: epoch seconds, None if not known; its stream's place in the streams asked for; the line)
Timed = tuple[int | None, int, str]


class OutputGone(RuntimeError):
    """A replica's output cannot be read: its node is gone and nothing was kept (the message says why)."""


def _quiet_tracebacks() -> None:
    """Uncaught :class:`OutputGone` prints its message, not a traceback: TorchX's ``log`` raises it from its
    reader threads and again from its main thread."""
    if getattr(threading.excepthook, "_azure_batch", False):
        return
    thread_hook, main_hook = threading.excepthook, sys.excepthook

    def in_thread(args: threading.ExceptHookArgs) -> None:
        if not isinstance(args.exc_value, OutputGone):
            thread_hook(args)

    def in_main(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, OutputGone):
            print(f"azure_batch: {value}", file=sys.stderr)
        else:
            main_hook(kind, value, tb)

    in_thread._azure_batch = True  # type: ignore[attr-defined]
    threading.excepthook = in_thread
    sys.excepthook = in_main


class AppFollower:
    """One app as every replica's reader sees it: read again at most once per poll."""

    def __init__(self, reader: AppReader, poll_seconds: float = POLL_SECONDS) -> None:
        self.reader = reader
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._app: App | None = None
        self._read_at = float("-inf")

    def app(self, *, fresh: bool = False) -> App | None:
        """The app as last read; with ``fresh``, read again if a poll has passed since."""
        with self._lock:
            if self._app is None or (fresh and time.monotonic() - self._read_at >= self.poll_seconds):
                self._app = self.reader.read(records=False)
                self._read_at = time.monotonic()
            return self._app

    def wait(self, seconds: float | None = None) -> None:
        """Until the next poll is due (or ``seconds``, when a transient error is waited out)."""
        with self._lock:
            due = self._read_at + self.poll_seconds
        time.sleep(seconds if seconds is not None else max(0.05, due - time.monotonic()))


@dataclass
class Stream:
    """One of a replica's files, read forward: where it is read from, how far (the watch's tail of a stream),
    and when it is read next while followed (the watch's read schedule)."""

    name: str
    files: Files | None = None
    tail: Tail = field(default_factory=lambda: Tail(StreamCursor()))
    read_any: bool = False
    times: Times = field(default_factory=Times)
    schedule: ReadSchedule = field(default_factory=ReadSchedule)

    def start_at(self, offset: int) -> None:
        self.tail = Tail(StreamCursor(offset))

    def read_new(self, *, final: bool) -> list[tuple[int, str]] | None:
        """Every complete line added since the last read (all of it when ``final``), with its offset in the file;
        None: the file is not there."""
        assert self.files is not None
        starts: list[int] = []
        lines: list[str] = []
        tail = self.tail
        while True:
            data = self.files.read(self.name, tail.read_to, tail.read_to + CHUNK_BYTES - 1)
            if data is None:
                if not lines:
                    return None
                break
            self.read_any = True
            if not data:
                break
            lines += tail.take(data, time.time(), final=False, starts=starts)
            if len(data) < CHUNK_BYTES:
                break
        if final and data is not None and tail.pending:
            lines += tail.finish(starts)
        return [(start, f"{line}\n") for start, line in zip(starts, lines, strict=True)]


def _note(message: str) -> None:
    print(f"azure_batch: {message}", file=sys.stderr)


@dataclass
class ReplicaLog:
    """The lines of one replica, as asked for."""

    follower: AppFollower
    role: str
    k: int
    streams: tuple[str, ...]
    pattern: re.Pattern[str] | None = None
    since: float | None = None
    until: float | None = None
    note: Callable[[str], None] = _note

    def _replica(self, fresh: bool) -> Replica:
        app = self.follower.app(fresh=fresh)
        replica = app.replica(self.role, self.k) if app is not None else None
        if replica is None:
            raise OutputGone(f"the app's job {self.follower.reader.job_id} is gone, and its output with it")
        return replica

    def _keep(self, written: int | None, line: str) -> bool:
        if not within(written, self.since, self.until, now=time.time()):
            return False
        return self.pattern is None or bool(self.pattern.search(line))

    # -- what is there now -------------------------------------------------------------------------------
    def lines(self) -> Iterator[str]:
        replica = self._replica(fresh=False)
        if replica.files is None and not replica.done:
            self.note(f"role '{self.role}' replica {self.k} has not started yet: no output so far (--tail follows it)")
            return
        per_stream = [self._stream_lines(replica, name) for name in self.streams]
        # Both streams merged by when their lines were written (stdout first within a second).
        merged = heapq.merge(*per_stream, key=lambda item: (item[0] if item[0] is not None else math.inf, item[1]))
        for written, _, line in merged:
            if self.until is not None and written is not None and written > self.until + 1:
                break
            if self._keep(written, line):
                yield line

    def _stream_lines(self, replica: Replica, name: str) -> Iterator[Timed]:
        stream = self._open(replica, name)
        times = stream.times
        order = self.streams.index(name)
        start = 0
        if self.since is not None and times:
            start = _offset_before(times, _key(name), self.since)
        if start:
            stream.start_at(start - 1)  # from the byte before: the line it ends is not one of ours
            first = stream.read_new(final=True)
            lines = (first or [])[1:]
        else:
            lines = stream.read_new(final=True) or []
        for offset, line in lines:
            yield times.time_of(_key(name), offset) if times else None, order, line

    def _open(self, replica: Replica, name: str) -> Stream:
        """The stream at its start, read where its files are now; OutputGone if nowhere."""
        stream = Stream(name)
        for files in (replica.files, replica.kept):
            if files is None:
                continue
            probe = files.read(name, 0, 0)
            if probe is not None:
                stream.files = files
                if self.since is not None or self.until is not None or len(self.streams) > 1:
                    text = read_whole(files, TIMES_FILE, TIMES_BYTES)
                    stream.times = Times.parse(text) if text else Times()
                    if not stream.times and (self.since is not None or self.until is not None):
                        self.note(
                            f"role '{self.role}' replica {self.k} has no record of when it wrote its output (it "
                            "ran without the scheduler's node wrapper): since/until select all of it"
                        )
                return stream
        raise self._gone(replica)

    def _gone(self, replica: Replica, *, after: bool = False) -> OutputGone:
        _quiet_tracebacks()
        message = replica.why_gone or f"The output of role '{self.role}' replica {self.k} cannot be read"
        return OutputGone(f"{message} (the lines above are what was read before)" if after else message)

    # -- followed ----------------------------------------------------------------------------------------
    def follow(self) -> Iterator[str]:
        """Every line, as the replica writes it, until it has ended and its output is read to the end. A transient
        error of the service is waited out as the watch waits it out; any other ends it."""
        from airflow_provider_azbatch import config
        from airflow_provider_azbatch.watching.outages import OutagePolicy

        replica: Replica | None = self._replica(fresh=True)
        assert replica is not None
        streams, partial = self._followed_streams(replica)
        policy = OutagePolicy(self.follower.reader.job_id)
        idle_seconds = config.get_float("idle_stream_interval")
        while True:
            shown: list[str] = []
            try:
                replica = replica or self._replica(fresh=True)
                done = replica.done  # asked before reading: the read after it gets all there is
                over = self.until is not None and time.time() > self.until + 1
                self._poll_streams(replica, streams, partial, shown, final=done, idle_seconds=idle_seconds)
            except Exception as exc:
                yield from shown
                self.follower.wait(self._wait_out(policy, exc))
                replica = None
                continue
            policy.succeeded()
            yield from shown
            if done or over:
                if done and any(stream.files is None for stream in streams):
                    raise self._gone(replica, after=any(stream.read_any for stream in streams))
                return
            self.follower.wait()
            replica = None

    def _followed_streams(self, replica: Replica) -> tuple[list[Stream], set[str]]:
        """The streams to follow, and those that start inside a line: lines before ``since`` are skipped by the
        time record there is now (a partial first line with them)."""
        streams = [Stream(name) for name in self.streams]
        partial: set[str] = set()
        if self.since is not None and replica.files is not None:
            text = read_whole(replica.files, TIMES_FILE, TIMES_BYTES)
            times = Times.parse(text) if text else Times()
            for stream in streams:
                stream.times = times
                stream.start_at(max(0, _offset_before(times, _key(stream.name), self.since) - 1))
                if stream.tail.read_to:
                    partial.add(stream.name)
        return streams, partial

    def _poll_streams(
        self,
        replica: Replica,
        streams: list[Stream],
        partial: set[str],
        shown: list[str],
        *,
        final: bool,
        idle_seconds: float,
    ) -> None:
        """One poll's new lines of the streams due (all of them once the replica ended), into ``shown``."""
        for stream in streams:
            now = time.time()
            # Due by the middle of the next poll: read in this one (the app is read once a poll, for all replicas).
            if not final and not stream.schedule.due(now + self.follower.poll_seconds / 2):
                continue
            before = stream.tail.read_to
            lines = self._poll(replica, stream, final=final)
            stream.schedule.read(stream.tail.read_to - before, now, self.follower.poll_seconds, idle_seconds)
            if stream.name in partial and lines:
                lines = lines[1:]
                partial.discard(stream.name)
            for offset, line in lines:
                written = stream.times.time_of(_key(stream.name), offset) if stream.times else None
                if self._keep(written, line):
                    shown.append(line)

    def _wait_out(self, policy: OutagePolicy, exc: Exception) -> float:
        """Seconds to wait after a transient error of the service; any other error (or an outage too long) is
        raised as it is."""
        from airflow_provider_azbatch.hooks.errors import describe_error
        from airflow_provider_azbatch.watching.outages import WaitFailed

        try:
            delay = policy.delay_after(exc, time.monotonic())
        except WaitFailed:
            raise exc from None
        self.note(f"Transient error from the Batch service ({describe_error(exc)}); retrying in {delay:.1f} s")
        return delay

    def _poll(self, replica: Replica, stream: Stream, *, final: bool) -> list[tuple[int, str]]:
        """New lines of the stream, from its node; once the replica ended and its node is gone, from what was
        kept (from where the node's left off: the same bytes)."""
        for files in (stream.files, replica.files, replica.kept):
            if files is None:
                continue
            stream.files = files
            lines = stream.read_new(final=final)
            if lines is not None:
                return lines
        stream.files = None
        return []


def _key(name: str) -> str:
    return "stdout" if name == STDOUT else "stderr"


def _offset_before(times: Times, stream: str, since: float) -> int:
    """A byte offset every line at or after ``since`` starts after: the size the stream had in the last
    second recorded before it."""
    column = 1 if stream == "stdout" else 2
    before = [sample[column] for sample in times.samples if sample[0] < int(since)]
    return max(before, default=0)


def replica_lines(
    follower: AppFollower,
    role: str,
    k: int,
    *,
    streams: str | None,
    regex: str | None,
    since: datetime | None,
    until: datetime | None,
    should_tail: bool,
) -> Iterator[str]:
    """The lines of role ``role``'s replica ``k``: ``stdout``, ``stderr``, or both (None)."""
    log = ReplicaLog(
        follower,
        role,
        k,
        NAMES.get(streams or "", (STDOUT, STDERR)),
        re.compile(regex) if regex else None,
        epoch(since),
        epoch(until),
    )
    return log.follow() if should_tail else log.lines()

"""``torchx log``: a replica's stdout and stderr, from its node while it is there, then from what was kept.

TorchX asks for each replica in a thread of its own; they share one :class:`AppFollower` per app, which reads the
app (the job, its task listing, a subtask listing per multi-node role: :mod:`.replicas`) at most once per poll,
whatever the number of replicas. Each replica then reads only the bytes its files grew by.

- Both streams (the default): with ``--tail``, each poll's new stdout lines, then its new stderr lines, so stderr
  (where torchrun and Python's logging write) shows as it is written; read at once, the two are merged by the
  time the replica's wrapper recorded for its output (``torchx-times.txt``), to the second.
- ``since``/``until`` select lines by that record too (lines read live count as written when read).
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
from typing import Any

from airflow_provider_azbatch.model.records import STDERR, STDOUT
from airflow_provider_azbatch.torchx.node import TIMES_FILE
from airflow_provider_azbatch.torchx.records import Times, epoch, within
from airflow_provider_azbatch.torchx.replicas import App, AppReader, Files, Replica, read_whole

# Bytes per read request.
CHUNK_BYTES = 4 * 1024 * 1024
# Seconds between polls of a followed app (one read of the app per poll, for all its replicas).
POLL_SECONDS = 2.0
# A time index is a line a second: a day's is about 2 MB.
TIMES_BYTES = 16 * 1024 * 1024
NAMES = {"stdout": (STDOUT,), "stderr": (STDERR,)}


class OutputGone(RuntimeError):
    """A replica's output cannot be read: its node is gone and nothing was kept (the message says why)."""


def _quiet_tracebacks() -> None:
    """Uncaught :class:`OutputGone` prints its message, not a traceback: TorchX's ``log`` raises it from its
    reader threads and again from its main thread."""
    if getattr(threading.excepthook, "_azure_batch", False):
        return
    thread_hook, main_hook = threading.excepthook, sys.excepthook

    def in_thread(args: Any) -> None:
        if not isinstance(args.exc_value, OutputGone):
            thread_hook(args)

    def in_main(kind: type[BaseException], value: BaseException, tb: Any) -> None:
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

    def wait(self) -> None:
        """Until the next poll is due."""
        with self._lock:
            due = self._read_at + self.poll_seconds
        time.sleep(max(0.05, due - time.monotonic()))


@dataclass
class Stream:
    """One of a replica's files, read forward: where it is read from, and how far."""

    name: str
    files: Files | None = None
    offset: int = 0
    pending: bytes = b""
    read_any: bool = False
    times: Times = field(default_factory=Times)

    def take(self, data: bytes, *, final: bool) -> list[tuple[int, str]]:
        """The complete lines in ``pending + data`` (all of it when ``final``), with their start offsets."""
        start = self.offset - len(self.pending)
        self.offset += len(data)
        text = self.pending + data
        *lines, self.pending = text.split(b"\n")
        if final and self.pending:
            lines.append(self.pending)
            self.pending = b""
        out = []
        for line in lines:
            out.append((start, line.decode("utf-8", errors="replace") + "\n"))
            start += len(line) + 1
        return out

    def read_new(self, *, final: bool) -> list[tuple[int, str]] | None:
        """Every complete line added since the last read; None: the file is not there."""
        assert self.files is not None
        lines: list[tuple[int, str]] = []
        while True:
            data = self.files.read(self.name, self.offset, self.offset + CHUNK_BYTES - 1)
            if data is None:
                return lines or None
            self.read_any = True
            if not data:
                break
            lines += self.take(data, final=False)
            if len(data) < CHUNK_BYTES:
                break
        if final and self.pending:
            lines += self.take(b"", final=True)
        return lines


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
    note: Callable[[str], None] = lambda message: print(f"azure_batch: {message}", file=sys.stderr)
    _files: dict[str, Stream] = field(default_factory=dict)

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

    def _stream_lines(self, replica: Replica, name: str) -> Iterator[tuple[int | None, int, str]]:
        stream = self._open(replica, name)
        times = stream.times
        order = self.streams.index(name)
        start = 0
        if self.since is not None and times:
            start = _offset_before(times, _key(name), self.since)
        if start:
            stream.offset = start - 1  # from the byte before: the line it ends is not one of ours
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
        """Every line, as the replica writes it, until it has ended and its output is read to the end."""
        replica = self._replica(fresh=True)
        streams = [Stream(name) for name in self.streams]
        # Lines before `since`: skipped by the time record there is now (a partial first line with them).
        partial: set[str] = set()
        if self.since is not None and replica.files is not None:
            text = read_whole(replica.files, TIMES_FILE, TIMES_BYTES)
            times = Times.parse(text) if text else Times()
            for stream in streams:
                stream.times = times
                stream.offset = max(0, _offset_before(times, _key(stream.name), self.since) - 1)
                if stream.offset:
                    partial.add(stream.name)
        while True:
            done = replica.done  # asked before reading: the read after it gets all there is
            over = self.until is not None and time.time() > self.until + 1
            for stream in streams:
                lines = self._poll(replica, stream, final=done)
                if stream.name in partial and lines:
                    lines = lines[1:]
                    partial.discard(stream.name)
                for offset, line in lines:
                    written = stream.times.time_of(_key(stream.name), offset) if stream.times else None
                    if self._keep(written, line):
                        yield line
            if done or over:
                if done and any(stream.files is None for stream in streams):
                    raise self._gone(replica, after=any(stream.read_any for stream in streams))
                return
            self.follower.wait()
            replica = self._replica(fresh=True)

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

"""The output reads of one Batch account's deferred jobs: which file is read when, within a request budget.

Batch has no call that reads many tasks' files at once: following a growing file costs a request per read, and a
read of a file that did not grow is wasted. So a triggerer's deferred triggers do not each read their tasks'
files on their own timers; they tell the account's :class:`OutputReads` which reads they want (each followed
stream's :class:`~airflow_provider_azbatch.watching.reads.ReadSchedule`: when it may be read, how likely it grew),
and it grants them:

- **at the trigger's own cadence**: a stream that grew is read again one ``poll_interval`` later, a quiet one
  less often (up to ``[azbatch] idle_stream_interval``), independently of the trigger's looks at its job;
- **likeliest growth first**: when more reads are due than the budget allows, the stream whose recent growth
  rate says it has most likely written a new line goes first (a stream never read before all);
- **spread**: grants are paced at the budget's rate, in small steps (``TICK_SECONDS``), never a burst;
- **within a budget**: ``[azbatch] output_requests_per_second`` requests a second for the account (every request
  a read takes: ranged reads, file listings, the states of tasks not started yet). A finished task's last output
  is read at once, outside the pace, and charged to it.

When the budget holds output back, it says so: the triggerer's log, at most every ``REPORT_SECONDS``, how late
the reads came past their time and why (how many files are followed, the budget); and each trigger's task log,
at most every ``TASK_REPORT_SECONDS``, how late its own output is shown.

One per account view (an event loop and a connection); a trigger reads nothing it was not granted, and the
reads it makes for a grant are its own poll (its checkpoints, stall checks and exactly-once rules hold).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from airflow_provider_azbatch import config
from airflow_provider_azbatch.watching.core import ReadKey
from airflow_provider_azbatch.watching.reads import ReadSchedule

log = logging.getLogger(__name__)

# The pace's step: grants are made at most this often (a budget of 400/s grants about 8 reads a step).
TICK_SECONDS = 0.02
# Reads the budget may grant at once after a quiet spell: a step's worth, at least one.
BURST_TICKS = 2
# A read granted this long past its time counts as held back by the budget.
LATE_SECONDS = 1.0
# The triggerer's log says how far behind the account's reads are at most this often.
REPORT_SECONDS = 60.0
# A trigger's task log says how late its output is shown at most this often.
TASK_REPORT_SECONDS = 600.0


@dataclass(eq=False)
class _Entry:
    """One wanted read in the pace's queues (dropped ones stay there, marked, until they come up)."""

    reader: Reader
    key: ReadKey
    eligible: float
    priority: float
    interval: float
    dropped: bool = False


@dataclass
class _Lateness:
    """Reads granted past their time since the last report."""

    granted: int = 0
    late: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.granted += 1
        if seconds > LATE_SECONDS:
            self.late.append(seconds)


class Reader:
    """One trigger's place in the account's output reads: it offers what its watch wants after each poll, and
    takes what was granted at its next."""

    def __init__(self, reads: OutputReads, wake: Callable[[], None]) -> None:
        self._reads = reads
        self._wake = wake
        self._entries: dict[ReadKey, _Entry] = {}
        self.granted: set[ReadKey] = set()
        self.late = 0.0  # the most a read granted since the last take() waited past its time
        self._reported_at = -math.inf
        self.closed = False

    def offer(self, schedules: Mapping[ReadKey, ReadSchedule]) -> None:
        """What the watch wants now (each followed stream's schedule); what it no longer wants is dropped."""
        for key in [key for key in self._entries if key not in schedules]:
            self._entries.pop(key).dropped = True
        for key, schedule in schedules.items():
            if key in self.granted:
                continue
            entry = self._entries.get(key)
            if entry is not None and (entry.eligible, entry.priority) == (schedule.eligible, schedule.priority):
                continue
            if entry is not None:
                entry.dropped = True
            interval = schedule.eligible - schedule.last if schedule.last is not None else 0.0
            entry = self._entries[key] = _Entry(self, key, schedule.eligible, schedule.priority, interval)
            self._reads.queue(entry)

    def take(self) -> set[ReadKey]:
        """The reads granted since the last take (the caller makes them in its next poll)."""
        granted, self.granted = self.granted, set()
        return granted

    def charge(self, requests: int, granted: int) -> None:
        """The poll made ``requests`` output requests for ``granted`` grants (one each when granted): what it made
        beyond them (a listing and the reads it called for, a finished task's last output) comes out of the budget
        too, and what it did not make (one listing for both streams of a task) goes back."""
        self._reads.spend(requests - granted)

    def lateness_report(self, now: float) -> float | None:
        """How late this trigger's output reads came, when it is time to say so in its log (else None)."""
        late, self.late = self.late, 0.0
        if late <= LATE_SECONDS or now - self._reported_at < TASK_REPORT_SECONDS:
            return None
        self._reported_at = now
        return late

    def _grant(self, entry: _Entry, late: float) -> None:
        del self._entries[entry.key]
        self.granted.add(entry.key)
        self.late = max(self.late, late)

    def close(self) -> None:
        self.closed = True
        for entry in self._entries.values():
            entry.dropped = True
        self._entries.clear()
        self.granted.clear()
        self._reads.leave(self)

    def next_eligible(self) -> float | None:
        """When the first read this trigger wants may be granted (None: it wants none)."""
        if self.granted:
            return time.time()
        return min((entry.eligible for entry in self._entries.values()), default=None)

    @property
    def wanted(self) -> int:
        return len(self._entries)

    @property
    def budget(self) -> float:
        """``[azbatch] output_requests_per_second`` of the account's reads."""
        return self._reads.rate

    def followed(self) -> int:
        """How many output files the account's reads follow (all its triggers together)."""
        return self._reads.followed()


class ReadPace:
    """Which wanted reads are granted when: a token bucket of ``rate`` requests a second (0: no limit) and two
    queues, the reads not due yet (by when they are) and those due (likeliest growth first). No I/O, no clock of
    its own: every call says what time it is."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.burst = max(1.0, rate * TICK_SECONDS * BURST_TICKS)
        self.tokens = self.burst
        self._refilled = now
        self._waiting: list[tuple[float, int, _Entry]] = []  # by eligible time
        self._ready: list[tuple[float, int, _Entry]] = []  # eligible, by priority
        self._order = itertools.count()
        self.period = _Lateness()
        self.grants = 0

    @property
    def limited(self) -> bool:
        return self.rate > 0

    def queue(self, entry: _Entry) -> None:
        heapq.heappush(self._waiting, (entry.eligible, next(self._order), entry))

    def spend(self, requests: int) -> None:
        """Requests made beyond the grants (negative: fewer than granted) come out of the bucket (go back)."""
        if self.limited:
            self.tokens = min(self.burst, self.tokens - requests)

    def grant(self, now: float) -> list[tuple[_Entry, float]]:
        """The reads granted now, each with how late it is past its time (0 for a first read)."""
        if self.limited:
            self.tokens = min(self.burst, self.tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        waiting, ready = self._waiting, self._ready
        while waiting and waiting[0][0] <= now:
            _, order, entry = heapq.heappop(waiting)
            if not entry.dropped:
                heapq.heappush(ready, (entry.priority, order, entry))
        granted: list[tuple[_Entry, float]] = []
        while ready and (not self.limited or self.tokens >= 1):
            _, _, entry = heapq.heappop(ready)
            if entry.dropped:
                continue
            late = now - entry.eligible if entry.interval else 0.0
            granted.append((entry, late))
            self.period.add(late)
            self.grants += 1
            if self.limited:
                self.tokens -= 1
        return granted

    def next_delay(self, now: float) -> float | None:
        """How long until a grant may be due (None: nothing is wanted)."""
        if self._ready and self.limited:
            return max(TICK_SECONDS, (1 - self.tokens) / self.rate)
        while self._waiting and self._waiting[0][2].dropped:
            heapq.heappop(self._waiting)
        if self._waiting:
            return max(TICK_SECONDS, self._waiting[0][0] - now)
        return None

    def waiting(self) -> int:
        """Reads due and not granted yet."""
        return sum(1 for _, _, entry in self._ready if not entry.dropped)


class OutputReads:
    """The pace of one account's output reads (see the module docstring)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self.rate = config.get_float("output_requests_per_second")
        self.pace = ReadPace(self.rate, time.time())
        self._readers: set[Reader] = set()
        self._kick = asyncio.Event()
        self._sleep_until = math.inf
        self._task: asyncio.Task[None] | None = None
        self._period_started = time.time()

    @property
    def grants(self) -> int:
        """Reads granted so far (for tests and the benchmark)."""
        return self.pace.grants

    def reader(self, wake: Callable[[], None]) -> Reader:
        reader = Reader(self, wake)
        self._readers.add(reader)
        return reader

    def leave(self, reader: Reader) -> None:
        self._readers.discard(reader)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def queue(self, entry: _Entry) -> None:
        self.pace.queue(entry)
        if self._task is None or self._task.done():  # the first read wanted starts the pace
            self._task = asyncio.create_task(self._run(), name=f"azbatch-output-reads-{self.conn_id}")
        elif entry.eligible < self._sleep_until:
            self._kick.set()

    def spend(self, requests: int) -> None:
        self.pace.spend(requests)

    # -- the pace -----------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            now = time.time()
            woken: set[Reader] = set()
            for entry, late in self.pace.grant(now):
                entry.reader._grant(entry, late)
                woken.add(entry.reader)
            for reader in woken:
                reader._wake()
            self._report(now)
            delay = self.pace.next_delay(now)
            self._sleep_until = now + delay if delay is not None else math.inf
            self._kick.clear()
            if delay is None:
                await self._kick.wait()
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._kick.wait(), delay)
                # A kick (a read wanted sooner than this sleep) waits for the step all the same: grants stay paced.
                rest = TICK_SECONDS - (time.time() - now)
                if rest > 0:
                    await asyncio.sleep(rest)

    def _report(self, now: float) -> None:
        """Say in the triggerer's log how far the budget held output back (at most every REPORT_SECONDS)."""
        if now - self._period_started < REPORT_SECONDS:
            return
        period, self.pace.period = self.pace.period, _Lateness()
        span, self._period_started = now - self._period_started, now
        if not period.late:
            return
        log.warning(lateness_message(self.conn_id, period, span, self.followed(), self.rate))

    def followed(self) -> int:
        return sum(reader.wanted + len(reader.granted) for reader in self._readers)

    def waiting(self) -> int:
        """Reads due and not granted yet (for tests and the benchmark)."""
        return self.pace.waiting()


def lateness_message(conn_id: str, period: _Lateness, span: float, followed: int, rate: float) -> str:
    """The triggerer's log line when the budget held reads back past their time."""
    late = sorted(period.late)
    return (
        f"Batch connection {conn_id!r}: {len(late)} of {period.granted} output reads in the last {span:.0f} s came "
        f"later than their time (by {late[len(late) // 2]:.0f} s at the median, {late[-1]:.0f} s at most): "
        f"{followed} output files are followed, and [azbatch] output_requests_per_second allows {rate:g} reads a "
        "second for the account; the files that grow fastest are read first. New output is shown that much later; "
        "raise the option (more requests to the account), or poll less often"
    )

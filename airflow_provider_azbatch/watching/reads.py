"""When to read each followed output file, and which first when reads are scarce. No I/O.

Batch has no call that reads many tasks' files at once: showing a growing file costs one request per read, and
a read of a file that did not grow is wasted. So each followed stream (a task's stdout or stderr) keeps a
:class:`ReadSchedule`:

- **eligible**: when it may be read next. A stream that grows (it grew at its last read, or its recent rate is
  a line per ``idle_stream_seconds`` or more) is read again after one ``poll_interval``, the trigger's own
  cadence: what following it live costs, one request per file and poll, which the budget bounds. One that does
  not grow backs off (every poll for ``QUIET_READS_PER_LEVEL`` reads, then twice as far apart, and so on, never
  more than ``idle_stream_seconds``).
- **priority**: when more streams are eligible than the reads a budget allows, the stream read first is the one
  that, from its recent growth rate, has most likely grown since its last read: the one whose expected time to
  write another line (``LINE_BYTES / rate`` after its last read, at most ``QUIET_PRIORITY_SECONDS``) came
  first. A stream never read comes before all others. Among streams growing alike this is the longest-waiting
  first. A stream that does not grow ranks as if it wrote a line ``QUIET_RAMP`` times as long after its last read
  as it has been quiet (at least ``idle_stream_seconds``, at most ``QUIET_PRIORITY_SECONDS``): a task's stdout
  before its first line is not kept waiting long, its stderr that never grows waits for the growing files.
  Without budget pressure ``idle_stream_seconds`` bounds how long any quiet stream waits; with it, the growing
  ones go first.

The rate is bytes per second, a time-weighted average over about ``RATE_MEMORY_SECONDS``: unbiased however often
the stream is read (a read after 20 s that finds 200 bytes and one after 10 s that finds 100 say the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A stream that did not grow is read every poll for this many reads, then half as often, and so on.
QUIET_READS_PER_LEVEL = 2
# What "another line" is when a stream's growth rate says when it has likely grown (bytes).
LINE_BYTES = 100
# How far back a stream's growth rate looks (seconds): long enough to span a few reads of a slow stream.
RATE_MEMORY_SECONDS = 60.0
# How long after its last read a stream that has been quiet for long ranks as likely to have grown (seconds), and
# how fast it gets there: QUIET_RAMP times as long as it has been quiet.
QUIET_PRIORITY_SECONDS = 300.0
QUIET_RAMP = 3.0


def quiet_wait(quiet: int, poll_interval: float, cap: float) -> float:
    """How long a stream that did not grow at its last ``quiet`` reads waits for its next (0: grew)."""
    if not quiet:
        return poll_interval
    level = quiet // QUIET_READS_PER_LEVEL
    growth: int = 2**level  # typeshed types int ** int as Any (a negative power is a float)
    return min(max(cap, poll_interval), poll_interval * growth)


@dataclass
class ReadSchedule:
    """When one stream is read next, and how urgently (see the module docstring). Times are epoch seconds."""

    last: float | None = None  # its last read (None: never read)
    rate: float = 0.0  # bytes a second, recently
    quiet: int = 0  # reads in a row that found nothing new
    grew: float | None = None  # when a read last found new bytes (or the first read, if none did)
    eligible: float = 0.0
    priority: float = -math.inf  # smaller first

    def read(self, new_bytes: int, now: float, poll_interval: float, idle_seconds: float) -> None:
        """Record a read that found ``new_bytes`` new bytes."""
        if self.last is not None and now > self.last:
            elapsed = now - self.last
            weight = 1.0 - math.exp(-elapsed / RATE_MEMORY_SECONDS)
            self.rate += weight * (new_bytes / elapsed - self.rate)
        elif new_bytes:  # the first read, of what the file held already: it writes, at least a line a poll
            self.rate = max(self.rate, LINE_BYTES / poll_interval)
        self.last = now
        self.quiet = 0 if new_bytes else self.quiet + 1
        if new_bytes or self.grew is None:
            self.grew = now
        idle = max(idle_seconds, poll_interval)
        expected = LINE_BYTES / self.rate if self.rate > 0 else math.inf
        if expected <= idle:  # it grows
            self.eligible = now + poll_interval
            self.priority = now + expected
        else:
            self.eligible = now + quiet_wait(self.quiet, poll_interval, idle_seconds)
            self.priority = now + min(QUIET_PRIORITY_SECONDS, max(idle, QUIET_RAMP * (now - self.grew)))

    def due(self, now: float) -> bool:
        return now >= self.eligible

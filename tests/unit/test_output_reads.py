"""When each followed output file is read, which first when reads are scarce, and how the account's budget paces
them (``watching.reads``, ``triggers.output_reads``), and a direct read's bookkeeping (``watching.streams``): no
service, explicit clocks."""

from __future__ import annotations

import math

import pytest

from airflow_provider_azbatch.triggers.output_reads import (
    BURST_TICKS,
    LATE_SECONDS,
    TASK_REPORT_SECONDS,
    TICK_SECONDS,
    Reader,
    ReadPace,
    _Entry,
    _Lateness,
    lateness_message,
)
from airflow_provider_azbatch.watching.reads import (
    LINE_BYTES,
    QUIET_PRIORITY_SECONDS,
    ReadSchedule,
    quiet_wait,
)
from airflow_provider_azbatch.watching.state import StreamCursor
from airflow_provider_azbatch.watching.streams import Tail

POLL = 5.0
IDLE = 30.0


# -- the schedule of one stream -------------------------------------------------------------------------------
def test_a_stream_that_grew_is_read_again_one_poll_later():
    schedule = ReadSchedule(eligible=0.0)
    assert schedule.priority == -math.inf  # never read: before every stream that was
    schedule.read(300, 100.0, POLL, IDLE)  # the first read, of what the file held: it writes
    assert schedule.eligible == 105.0
    assert schedule.due(105.0)
    assert not schedule.due(104.9)
    schedule.read(100, 105.0, POLL, IDLE)
    assert (schedule.eligible, schedule.quiet, schedule.grew) == (110.0, 0, 105.0)


def test_a_quiet_stream_is_read_every_poll_twice_then_half_as_often_up_to_the_idle_interval():
    assert [quiet_wait(quiet, POLL, IDLE) for quiet in range(8)] == [5.0, 5.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0]
    assert quiet_wait(3, 1.0, 2.0) == 2.0
    assert quiet_wait(1, 60.0, 30.0) == 60.0  # never more often than the poll
    schedule = ReadSchedule(eligible=0.0)
    now = 0.0
    waits = []
    for _ in range(8):
        schedule.read(0, now, POLL, IDLE)
        waits.append(schedule.eligible - now)
        now = schedule.eligible
    assert waits == [5.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0]


def test_the_growth_rate_does_not_depend_on_how_often_the_stream_is_read():
    often, seldom = ReadSchedule(), ReadSchedule()
    often.read(0, 0.0, POLL, IDLE)
    seldom.read(0, 0.0, POLL, IDLE)
    for k in range(1, 13):
        often.read(50, 5.0 * k, POLL, IDLE)  # 10 bytes a second, read every 5 s
        if k % 4 == 0:
            seldom.read(200, 5.0 * k, POLL, IDLE)  # the same stream read every 20 s
    assert often.rate == pytest.approx(seldom.rate, rel=0.02)
    assert 0 < often.rate < 10.0  # a time-weighted average that started at 0


def test_the_stream_likeliest_to_have_grown_comes_first():
    fast, slow, quiet = ReadSchedule(), ReadSchedule(), ReadSchedule()
    for schedule in (fast, slow, quiet):
        schedule.read(0, 0.0, POLL, IDLE)
    for k in range(1, 7):
        fast.read(100, 5.0 * k, POLL, IDLE)  # a line a poll
        slow.read(100 if k % 2 == 0 else 0, 5.0 * k, POLL, IDLE)  # a line every other poll
        quiet.read(0, 5.0 * k, POLL, IDLE)
    assert fast.rate > slow.rate > 0 == quiet.rate
    # Read at the same moment, the faster stream is expected to have written its next line sooner.
    assert fast.priority == 30.0 + LINE_BYTES / fast.rate
    assert fast.priority < slow.priority < quiet.priority
    # A stream quiet for long ranks as if it wrote a line three times as long after its last read (capped).
    assert quiet.priority == 30.0 + 3 * 30.0
    quiet.read(0, 400.0, POLL, IDLE)
    assert quiet.priority == 400.0 + QUIET_PRIORITY_SECONDS


# -- the pace of an account's reads ---------------------------------------------------------------------------
class _Owner:
    closed = False


def _entry(key: str, eligible: float, priority: float, interval: float = POLL) -> _Entry:
    return _Entry(_Owner(), (key, "stdout.txt"), eligible, priority, interval)  # type: ignore[arg-type]


def _run(pace: ReadPace, start: float, seconds: float) -> list[list[str]]:
    """What each step grants from ``start`` for ``seconds`` (a step every TICK_SECONDS, as the pace runs)."""
    steps = []
    for k in range(round(seconds / TICK_SECONDS)):
        steps.append([entry.key[0] for entry, _ in pace.grant(start + k * TICK_SECONDS)])
    return steps


def test_the_budget_caps_the_reads_of_an_account_and_spreads_them_over_the_interval():
    pace = ReadPace(100.0, 0.0)
    for k in range(1000):
        pace.queue(_entry(f"f{k}", 0.0, float(k)))
    steps = _run(pace, 0.0, 2.0)
    granted = sum(len(step) for step in steps)
    burst = 100.0 * TICK_SECONDS * BURST_TICKS
    assert 200 <= granted <= 200 + burst  # 100 a second, and the bucket it started with
    # No burst: no step grants more than the bucket holds, and they come at every step.
    assert max(len(step) for step in steps) <= burst
    assert all(steps[k] or steps[k + 1] for k in range(len(steps) - 1))
    assert pace.waiting() == 1000 - granted
    assert [key for step in steps for key in step][:5] == ["f0", "f1", "f2", "f3", "f4"]  # by priority


def test_requests_beyond_the_grants_come_out_of_the_budget_and_those_not_made_go_back():
    pace = ReadPace(100.0, 0.0)
    for k in range(100):
        pace.queue(_entry(f"f{k}", 0.0, float(k)))
    assert len(pace.grant(0.0)) == 100.0 * TICK_SECONDS * BURST_TICKS  # the bucket it started with
    pace.spend(10)  # a poll made ten requests more than it was granted (a listing and its reads, say)
    assert pace.grant(0.099) == []  # 100 a second: the ten requests' tenth of a second is not over
    assert len(pace.grant(0.11)) == 1
    pace.spend(-2)  # a poll made two requests fewer (one listing for both streams of a task)
    assert len(pace.grant(0.11)) == 2  # back, though no more than the bucket holds


def test_without_a_limit_every_due_read_is_granted_at_once_and_none_before_its_time():
    pace = ReadPace(0.0, 0.0)
    for k in range(500):
        pace.queue(_entry(f"f{k}", 0.0, 0.0))
    pace.queue(_entry("later", 7.0, -1.0))
    assert len(pace.grant(1.0)) == 500
    assert pace.next_delay(1.0) == 6.0
    assert [(entry.key[0], late) for entry, late in pace.grant(9.5)] == [("later", 2.5)]
    assert pace.next_delay(9.5) is None


def test_a_dropped_read_is_never_granted():
    pace = ReadPace(0.0, 0.0)
    kept, dropped = _entry("kept", 0.0, 1.0), _entry("dropped", 0.0, 0.0)
    pace.queue(kept)
    pace.queue(dropped)
    dropped.dropped = True
    assert [entry.key[0] for entry, _ in pace.grant(0.0)] == ["kept"]


def test_how_late_reads_come_is_measured_against_their_time_except_a_first_read():
    pace = ReadPace(1.0, 0.0)
    pace.queue(_entry("first", 0.0, 0.0, interval=0.0))
    pace.queue(_entry("again", 0.0, 1.0))
    granted = pace.grant(0.0)
    assert [(entry.key[0], late) for entry, late in granted] == [("first", 0.0)]
    (entry, late), *_ = pace.grant(4.0)
    assert (entry.key[0], late) == ("again", 4.0)
    assert (pace.period.granted, pace.period.late) == (2, [4.0])


def test_the_logs_say_how_late_output_is_and_why():
    period = _Lateness()
    for late in (0.5, 3.0, 12.0, 20.0):
        period.add(late)
    assert lateness_message("azbatch_default", period, 60.0, 4000, 400.0) == (
        "Batch connection 'azbatch_default': 3 of 4 output reads in the last 60 s came later than their time (by "
        "12 s at the median, 20 s at most): 4000 output files are followed, and [azbatch] "
        "output_requests_per_second allows 400 reads a second for the account; the files that grow fastest are "
        "read first. New output is shown that much later; raise the option (more requests to the account), or "
        "poll less often"
    )


class _Reads:
    rate = 400.0

    def leave(self, reader: Reader) -> None: ...


def test_a_trigger_says_how_late_its_output_is_at_most_every_ten_minutes():
    reader = Reader(_Reads(), lambda: None)  # type: ignore[arg-type]
    reader.late = LATE_SECONDS
    assert reader.lateness_report(1000.0) is None  # not late enough to say
    reader.late = 8.0
    assert reader.lateness_report(1000.0) == 8.0
    assert reader.late == 0.0
    reader.late = 9.0
    assert reader.lateness_report(1000.0 + TASK_REPORT_SECONDS - 1) is None
    reader.late = 9.0
    assert reader.lateness_report(1000.0 + TASK_REPORT_SECONDS) == 9.0


# -- a direct read ---------------------------------------------------------------------------------------------
def _tail_read_to(data: bytes) -> Tail:
    tail = Tail(StreamCursor())
    tail.known_size = len(data)
    assert tail.direct_range(1024) is None  # nothing downloaded yet: list the file
    tail.take(data, 0.0, final=False)
    return tail


def test_a_direct_read_starts_one_byte_early_and_shows_the_lines_it_completes():
    tail = _tail_read_to(b"one\ntw")
    assert tail.direct_range(1024) == (5, 1028)
    assert tail.take_direct((5, 1028), b"wo\nthree\n", 1.0) == ["two", "three"]
    assert (tail.cursor.offset, tail.known_size) == (14, 14)
    assert tail.direct_range(1024) == (13, 1036)
    assert tail.take_direct((13, 1036), b"\n", 2.0) == []  # it did not grow: that one byte


def test_a_direct_read_that_is_not_the_file_read_so_far_asks_for_a_listing():
    tail = _tail_read_to(b"one\n")
    assert tail.take_direct((3, 1026), b"X and more\n", 1.0) is None  # another file at that byte: a retry
    assert tail.direct_range(1024) is None
    tail = _tail_read_to(b"one\n")
    assert tail.take_direct((3, 1026), b"", 1.0) is None  # it ends before the byte read last
    assert tail.direct_range(1024) is None
    tail = _tail_read_to(b"one\n")
    # A service that ignores the range sends the whole file: the span is cut out of it.
    assert tail.direct_range(3) == (3, 5)
    assert tail.take_direct((3, 5), b"one\ntwo\nthree\n", 1.0) == []
    assert (tail.read_to, bytes(tail.pending)) == (6, b"tw")

"""The pure parts of ``airflow azbatch``: line times, line filters, times and durations. No service."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_azbatch.cli.command import UsageError
from airflow_provider_azbatch.cli.line_filters import LineFilter, line_time
from airflow_provider_azbatch.cli.times import format_duration, parse_time

UTC = timezone.utc


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-01-01T10:00:00Z started", datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)),
        ("2026-01-01T10:00:00.123456789Z x", datetime(2026, 1, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-01 10:00:05,250 INFO x", datetime(2026, 1, 1, 10, 0, 5, 250000, tzinfo=UTC)),
        ("[2026-01-01T12:00:00+02:00] x", datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)),
        ("2026-01-01T05:00:00-0500 x", datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)),
        ("2026-01-01T10:00:00", datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)),
        ("2026-01-01T10:00:00|x", datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)),
        ("  2026-01-01T10:00:00Z indented: a continuation", None),
        ("epoch 2026-01-01T10:00:00Z", None),
        ("2026-13-45T10:00:00Z not a date", None),
        ("2026-01-01T10:00:00Zulu", None),
        ("2026-01-01", None),
    ],
)
def test_line_time(line, expected):
    assert line_time(line) == expected


def test_untimed_lines_belong_to_the_timestamped_line_above_them_per_stream():
    window = LineFilter(
        since=datetime(2026, 1, 1, 10, 0, 5, tzinfo=UTC), until=datetime(2026, 1, 1, 10, 0, 10, tzinfo=UTC)
    )
    out, err = ("t", "stdout.txt"), ("t", "stderr.txt")
    decisions = [
        window.accepts(out, "preamble"),
        window.accepts(out, "2026-01-01T10:00:00Z early"),
        window.accepts(out, "  detail of early"),
        window.accepts(out, "2026-01-01T10:00:06Z inside"),
        window.accepts(err, "stderr has no time yet"),
        window.accepts(out, "  detail of inside"),
        window.accepts(out, "2026-01-01T10:00:11Z late"),
        window.accepts(out, "  detail of late"),
    ]

    assert decisions == [False, False, False, True, False, True, False, False]
    window.restart(out)
    assert window.accepts(out, "a retried task's first line has no time") is False


def test_grep_and_window_together():
    both = LineFilter(re.compile("keep"), since=datetime(2026, 1, 1, tzinfo=UTC))

    assert both.accepts(("t", "s"), "2026-01-01T00:00:01Z keep") is True
    assert both.accepts(("t", "s"), "  keep this continuation") is True
    assert both.accepts(("t", "s"), "  drop this one") is False
    assert LineFilter(re.compile("^x")).accepts(("t", "s"), "no time needed: x") is False


def test_parse_time():
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    assert parse_time("90s", "--since", now) == now - timedelta(seconds=90)
    assert parse_time("1.5h", "--since", now) == now - timedelta(minutes=90)
    assert parse_time("2D", "--since", now) == now - timedelta(days=2)
    assert parse_time("1w", "--since", now) == now - timedelta(days=7)
    assert parse_time("2026-12-01T10:00:00Z", "--since") == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert parse_time("2026-12-01 10:00", "--since") == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert parse_time("2026-12-01T11:00:00+01:00", "--since") == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert parse_time("2026-12-01", "--until") == datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(UsageError, match=r"^--until '10 minutes' is not a time: give an ISO 8601 time"):
        parse_time("10 minutes", "--until", now)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, ""), (0.04, "0.0s"), (12.345, "12.3s"), (65, "1m 05s"), (7380, "2h 03m"), (273600, "3d 04h")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text

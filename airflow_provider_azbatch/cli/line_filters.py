"""Which output lines ``airflow azbatch logs`` shows: ``--grep`` and ``--since``/``--until``. No I/O.

A task's output files carry no time per line, so ``--since``/``--until`` go by the time a line starts
with, where the task writes one (as logging libraries do): ISO 8601 (``2026-12-01T10:00:05.123Z``,
``2026-12-01 10:00:05,123`` as Python's logging writes it), optionally in square brackets. A time
without a zone is UTC, the zone of Batch nodes. A line without a time of its own (a traceback, the rest
of a multi-line message) belongs to the last line above it that had one; lines before the first
timestamped line of a stream have no time and are left out when a window is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from airflow_provider_azbatch.cli.command import UsageError

LEADING_TIME = re.compile(
    r"\[?(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:[.,](?P<fraction>\d{1,9}))?"
    r"(?P<zone>Z|[+-]\d{2}:?\d{2})?(?=$|[\s\]|,;])"
)

# (Batch task id, file name): the stream a line comes from.
StreamKey = tuple[str, str]


def line_time(line: str) -> datetime | None:
    """The time ``line`` starts with, if it starts with one."""
    match = LEADING_TIME.match(line)
    if match is None:
        return None
    zone = match.group("zone") or "+00:00"
    if zone == "Z":
        zone = "+00:00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    fraction = (match.group("fraction") or "0")[:6].ljust(6, "0")
    try:
        parsed = datetime.fromisoformat(f"{match.group('date')}T{match.group('time')}.{fraction}{zone}")
    except ValueError:  # 2026-13-45: not a time after all
        return None
    return parsed.astimezone(timezone.utc)


def compile_grep(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--grep {pattern!r} is not a valid regular expression: {exc}") from None


@dataclass
class LineFilter:
    """Decides line by line, per stream, what is shown."""

    pattern: re.Pattern[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    # The time of the last timestamped line of each stream (continuation lines take it).
    _times: dict[StreamKey, datetime] = field(default_factory=dict)
    # Whether any line of any stream had a time (to tell the user when a window can match nothing).
    saw_time: bool = False

    @property
    def windowed(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def active(self) -> bool:
        return self.pattern is not None or self.windowed

    def restart(self, key: StreamKey) -> None:
        """The stream started over (the task was retried): its lines' times start over too."""
        self._times.pop(key, None)

    def accepts(self, key: StreamKey, line: str) -> bool:
        if self.windowed:
            stamp = line_time(line)
            if stamp is not None:
                self._times[key] = stamp
                self.saw_time = True
            else:
                stamp = self._times.get(key)
            if stamp is None:
                return False
            if self.since is not None and stamp < self.since:
                return False
            if self.until is not None and stamp > self.until:
                return False
        return self.pattern is None or self.pattern.search(line) is not None

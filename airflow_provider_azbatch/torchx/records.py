"""What a replica's wrapper keeps beside its output (:mod:`.node`), read back: its record and its time index.
Pure: no I/O, no Airflow."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timezone

STREAM_COLUMNS = {"stdout": 1, "stderr": 2}


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Record:
    """A replica's own account of itself (``torchx-replica.txt``)."""

    replica: int
    state: str  # running, succeeded or failed
    exit_code: int | None = None
    restarts: int = 0
    started: int | None = None
    ended: int | None = None
    host: str = ""

    @classmethod
    def parse(cls, text: str) -> Record | None:
        """None for anything but a whole record (a file being replaced reads empty, or not at all)."""
        fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        replica = _int(fields.get("replica"))
        state = fields.get("state", "")
        if replica is None or state not in ("running", "succeeded", "failed") or "host" not in fields:
            return None
        return cls(
            replica=replica,
            state=state,
            exit_code=_int(fields.get("exit_code")),
            restarts=_int(fields.get("restarts")) or 0,
            started=_int(fields.get("started")),
            ended=_int(fields.get("ended")),
            host=fields.get("host", ""),
        )

    @property
    def ended_itself(self) -> bool:
        return self.state in ("succeeded", "failed")

    @property
    def end_time(self) -> datetime | None:
        return datetime.fromtimestamp(self.ended, timezone.utc) if self.ended is not None else None


@dataclass(frozen=True)
class Times:
    """When a replica's output grew (``torchx-times.txt``): (epoch seconds, stdout bytes, stderr bytes), in order.

    A sample says the bytes before its sizes were written by its time; so a byte at offset ``o`` was written in
    the second of the first sample whose size is beyond ``o`` (the wrapper samples every second)."""

    samples: tuple[tuple[int, int, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Times:
        samples = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and all(part.isdigit() for part in parts):
                samples.append((int(parts[0]), int(parts[1]), int(parts[2])))
        samples.sort()
        return cls(tuple(samples))

    def __bool__(self) -> bool:
        return bool(self.samples)

    def time_of(self, stream: str, offset: int) -> int | None:
        """When the byte at ``offset`` of the stream was written (epoch seconds); None: after the last sample."""
        column = STREAM_COLUMNS[stream]
        sizes = [sample[column] for sample in self.samples]
        # Sizes only grow (a restart appends to the same files); the first sample beyond the offset.
        index = bisect.bisect_right(_running_max(sizes), offset)
        return self.samples[index][0] if index < len(self.samples) else None


def _running_max(values: list[int]) -> list[int]:
    out, top = [], 0
    for value in values:
        top = max(top, value)
        out.append(top)
    return out


def epoch(moment: datetime | None) -> float | None:
    """A datetime as epoch seconds; a naive one is taken as local time, as TorchX's callers pass them."""
    return None if moment is None else moment.timestamp()


def within(written: int | None, since: float | None, until: float | None, *, now: float) -> bool:
    """Whether output recorded in second ``written`` (None: after the last sample, so about ``now``) may have been
    written in [since, until]. The wrapper samples once a second: output recorded in second ``s`` was written in
    the second before it, so the selection is to the second (a line up to a second either side may be in)."""
    moment = written if written is not None else now
    if since is not None and moment < since:
        return False
    return until is None or moment <= until + 1

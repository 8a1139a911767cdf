"""A watcher's cursor: which completed jobs it has fired for, kept where a restarted watcher finds it.

Airflow re-creates an event trigger from its kwargs after a triggerer restart, or on another triggerer that takes
it over, with no memory. The cursor is that memory: a watermark (every matching job that completed at or after it
fires, unless listed as fired) and the jobs fired that completed at or after it. A restarted watcher asks the
account view to reach back to the watermark, so the jobs that completed while no triggerer watched fire, and the
ones already fired do not.

A fired job enters the saved cursor ``SETTLE_SECONDS`` after its event was handed to the triggerer: the triggerer
writes events to Airflow's database about once a second, and one that stops before it wrote an event loses it. A
job whose event may not be written yet is thus fired again by the next watcher (never lost); one whose event was
written and which stopped within those seconds fires twice (see docs/howto/job-events.md).

The watermark trails the newest change the watcher saw by ``KEEP_SECONDS`` (service time), and never passes a job
it has not decided on yet (its tasks not read, a failed read): the saved list of fired jobs stays that short.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

# The watermark trails the newest change seen by this much: far longer than a listing can be late (the view's looks
# overlap by seconds).
KEEP_SECONDS = 120.0
# A fired job is saved as fired this long after its event was handed to the triggerer (a few of its loops).
SETTLE_SECONDS = 5.0


@dataclass
class Cursor:
    """What a watcher saves: every matching job completed at or after ``watermark`` and not in ``fired`` fires."""

    watermark: datetime
    fired: dict[str, str] = field(default_factory=dict)  # job id -> when it completed (ISO 8601, service time)

    def to_json(self) -> str:
        return json.dumps({"watermark": self.watermark.isoformat(), "fired": dict(sorted(self.fired.items()))})

    @classmethod
    def from_json(cls, text: str) -> Cursor:
        data = json.loads(text)
        watermark = datetime.fromisoformat(data["watermark"])
        if watermark.tzinfo is None:
            watermark = watermark.replace(tzinfo=timezone.utc)
        fired = data.get("fired") or {}
        if not isinstance(fired, dict):
            raise ValueError("fired is not a mapping")
        return cls(watermark, {str(job): str(at) for job, at in fired.items()})


class Completions:
    """A running watcher's memory of the jobs it decided on, and the cursor it saves (see the module docstring).

    ``now`` arguments are monotonic seconds (the settling clock); job times are the service's.
    """

    def __init__(self, saved: Cursor | None) -> None:
        self._watermark = saved.watermark if saved is not None else None
        self._fired: dict[str, datetime] = {job: _parse(at) for job, at in (saved.fired if saved else {}).items()}
        self._unsettled: dict[str, tuple[datetime, float]] = {}  # fired, not yet saved: completed at, fired at
        self._pending: dict[str, datetime] = {}  # matched by the listing, not decided yet
        self._newest: datetime | None = None
        self._saved: Cursor | None = saved

    @property
    def started(self) -> bool:
        return self._watermark is not None

    @property
    def watermark(self) -> datetime | None:
        return self._watermark

    def start(self, since: datetime) -> None:
        """A new watcher (no saved cursor): it fires for the jobs that complete from ``since`` on."""
        if self._watermark is None:
            self._watermark = since

    def seen(self, at: datetime) -> None:
        """The view listed a change at ``at`` (any job, any state): the service's time has reached it."""
        if self._newest is None or at > self._newest:
            self._newest = at

    def is_new(self, job_id: str, completed_at: datetime) -> bool:
        """Whether a completed job is one to decide on: not fired, not being decided, not before the watermark."""
        if job_id in self._fired or job_id in self._unsettled or job_id in self._pending:
            return False
        return self._watermark is None or completed_at >= self._watermark

    def pending(self, job_id: str, completed_at: datetime) -> None:
        """The job passed the listing's filters; its tasks decide (until then the watermark stays before it)."""
        self._pending[job_id] = completed_at

    def decided(self, job_id: str) -> None:
        """The job did not pass the outcome filter: nothing to fire, nothing to remember."""
        self._pending.pop(job_id, None)

    def fired(self, job_id: str, now: float) -> None:
        completed_at = self._pending.pop(job_id)
        self._unsettled[job_id] = (completed_at, now)

    def to_save(self, now: float) -> Cursor | None:
        """The cursor to save now, if it differs from the one saved last (None: nothing to save)."""
        if self._watermark is None:
            return None
        for job_id, (completed_at, fired_at) in list(self._unsettled.items()):
            if now - fired_at >= SETTLE_SECONDS:
                del self._unsettled[job_id]
                self._fired[job_id] = completed_at
        watermark = self._watermark
        if self._newest is not None:
            undecided = [at for at in self._pending.values()] + [at for at, _ in self._unsettled.values()]
            candidate = min([self._newest - timedelta(seconds=KEEP_SECONDS), *undecided])
            watermark = max(watermark, candidate)
        self._watermark = watermark
        self._fired = {job: at for job, at in self._fired.items() if at >= watermark}
        cursor = Cursor(watermark, {job: at.isoformat() for job, at in self._fired.items()})
        if self._saved is not None and cursor == self._saved:
            return None
        return cursor

    def saved(self, cursor: Cursor) -> None:
        self._saved = cursor


def _parse(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

"""Job schedules: their settings, states and execution info, as the REST reference and the recorded service
(``azure-sdk-assets`` ``test_batch_job_schedules``, api-version 2025-06-01) show them.

A schedule's ``schedule`` says when jobs are made (``doNotRunUntil``, ``doNotRunAfter``, ``startWindow``,
``recurrenceInterval``), its ``jobSpecification`` what each job is; the jobs it makes are named
``{scheduleId}:job-{n}``. When they are made is worked out in ``job_schedule_operations.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from local_azure_batch.lang.times import DurationError, format_duration, parse_duration, parse_iso_datetime

from . import validation as v
from .clock import iso
from .entity import Entity
from .errors import BatchServiceError, invalid_property
from .jobs import PoolSpecNormalizer, normalize_job

ACTIVE_SCHEDULE, DISABLED_SCHEDULE, TERMINATING_SCHEDULE = "active", "disabled", "terminating"
COMPLETED_SCHEDULE, DELETING_SCHEDULE = "completed", "deleting"

# "The minimum value is 1 minute. If you specify a lower value, the Batch service rejects the schedule with an
# error; if you are calling the REST API directly, the HTTP status code is 400 (Bad Request)." (REST reference,
# Schedule.recurrenceInterval and Schedule.startWindow)
MINIMUM_INTERVAL = timedelta(minutes=1)
_PLACEHOLDER_ID = "jobschedule-job"


def schedule_not_found() -> BatchServiceError:
    # Recorded: 404 JobScheduleNotFound, "The specified job schedule does not exist."
    return BatchServiceError(404, "JobScheduleNotFound", "The specified job schedule does not exist.")


def schedule_exists() -> BatchServiceError:
    return BatchServiceError(409, "JobScheduleExists", "The specified job schedule already exists.")


def schedule_being_deleted() -> BatchServiceError:
    return BatchServiceError(
        409,
        "JobScheduleBeingDeleted",
        "The specified job schedule has been marked for deletion and is being garbage collected.",
    )


def schedule_completed() -> BatchServiceError:
    return BatchServiceError(409, "JobScheduleCompleted", "The specified job schedule is already in a completed state.")


def schedule_being_terminated() -> BatchServiceError:
    return BatchServiceError(409, "JobScheduleBeingTerminated", "The specified job schedule is being terminated.")


def normalize_schedule_body(body: Any, normalize_pool_spec: PoolSpecNormalizer) -> dict[str, Any]:
    """A create body (``BatchJobScheduleCreateOptions``) checked, with the service's defaults filled in."""
    if not isinstance(body, dict):
        raise invalid_property("jobSchedule", body, "The job schedule must be a JSON object.")
    spec = copy.deepcopy(body)
    v.check_id(v.require(spec, "id"))
    spec["schedule"] = normalize_timing(v.require(spec, "schedule"))
    spec["jobSpecification"] = normalize_job_specification(v.require(spec, "jobSpecification"), normalize_pool_spec)
    return spec


def normalize_timing(schedule: Any) -> dict[str, Any]:
    """``schedule`` with times in the service's form (``PT01H00M00S`` comes back ``PT1H``, recorded)."""
    if not isinstance(schedule, dict):
        raise invalid_property("schedule", schedule, "The schedule must be a JSON object.")
    out = dict(schedule)
    for name in ("doNotRunUntil", "doNotRunAfter"):
        if out.get(name) is None:
            out.pop(name, None)
            continue
        parsed = parse_iso_datetime(str(out[name]))
        if parsed is None:
            raise invalid_property(f"schedule.{name}", out[name], "The value must be an ISO 8601 date and time.")
        out[name] = iso(parsed)
    for name in ("startWindow", "recurrenceInterval"):
        if out.get(name) is None:
            out.pop(name, None)
            continue
        try:
            value = parse_duration(out[name])
        except DurationError as exc:
            raise invalid_property(f"schedule.{name}", out[name], str(exc)) from None
        if value < MINIMUM_INTERVAL:
            raise invalid_property(f"schedule.{name}", out[name], "The minimum value is 1 minute.")
        out[name] = format_duration(value)
    return out


def normalize_job_specification(body: Any, normalize_pool_spec: PoolSpecNormalizer) -> dict[str, Any]:
    """A job specification is a job without an id: checked as a job is, with the same defaults (recorded)."""
    if not isinstance(body, dict):
        raise invalid_property("jobSpecification", body, "The job specification must be a JSON object.")
    spec = normalize_job({**body, "id": _PLACEHOLDER_ID}, normalize_pool_spec)
    del spec["id"]
    return spec


def duration_of(schedule: dict[str, Any], name: str) -> timedelta | None:
    text = schedule.get(name)
    return None if text is None else parse_duration(text)


def time_of(schedule: dict[str, Any], name: str) -> datetime | None:
    text = schedule.get(name)
    return None if text is None else parse_iso_datetime(text)


class JobSchedule(Entity):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(ACTIVE_SCHEDULE, spec)
        # The start of the next interval whose job is still to be made (None: no more jobs).
        self.next_run: datetime | None = None
        # The start of the interval the most recent job was made for: an update counts the next one from it.
        self.last_run: datetime | None = None
        self.recent_job: str | None = None
        self.job_count = 0
        self.end_time: datetime | None = None

    @property
    def path(self) -> str:
        return f"/jobschedules/{self.id}"

    @property
    def timing(self) -> dict[str, Any]:
        timing: dict[str, Any] = self.spec["schedule"]
        return timing

    def next_job_id(self) -> str:
        self.job_count += 1
        return f"{self.id}:job-{self.job_count}"

    def execution_info(self, base_url: str) -> dict[str, Any]:
        """As recorded: ``nextRunTime`` while jobs are to come, ``recentJob`` once one was made, ``endTime``
        once the schedule completed."""
        info: dict[str, Any] = {}
        if self.next_run is not None and self.state in (ACTIVE_SCHEDULE, DISABLED_SCHEDULE, DELETING_SCHEDULE):
            info["nextRunTime"] = iso(self.next_run)
        if self.recent_job is not None:
            info["recentJob"] = {"url": f"{base_url}/jobs/{self.recent_job}", "id": self.recent_job}
        if self.end_time is not None:
            info["endTime"] = iso(self.end_time)
        return info

    def to_wire(self, base_url: str, fields: Collection[str] | None = None) -> dict[str, Any]:
        out = self._wire_start(f"{base_url}{self.path}", fields)
        self._wire_spec(out, fields)
        if fields is None or "executionInfo" in fields:
            out["executionInfo"] = self.execution_info(base_url)
        return out

"""Job schedule operations, and the scheduler that makes each recurrence's job.

When jobs are made (REST reference, ``Schedule``): the first interval starts at ``doNotRunUntil`` (at once when
absent), each next one ``recurrenceInterval`` after the one before; no job starts after ``doNotRunAfter``. A
schedule has at most one active job: an interval that comes while its previous job still runs waits for it, but
only for ``startWindow`` and never into the next interval ("the Job that is 'due' in one recurrenceInterval is
not carried forward into the next recurrence interval"); an interval it could not start in is skipped. Without
``recurrenceInterval`` the schedule makes one job and completes when that job does; with ``doNotRunAfter``
passed it completes once its last job does.

Statuses as recorded (``test_batch_job_schedules``, api-version 2025-06-01): create 201, replace/update 200,
disable/enable 204, terminate 202 (the schedule is completed once its job has ended), delete 202 (its jobs are
deleted with it, then the schedule is gone: 404 ``JobScheduleNotFound``).
"""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime, timedelta
from typing import Any

from .account import Account
from .clock import utcnow
from .errors import active_job_quota_reached, invalid_property
from .job_operations import JobOperations
from .job_schedules import (
    ACTIVE_SCHEDULE,
    COMPLETED_SCHEDULE,
    DELETING_SCHEDULE,
    DISABLED_SCHEDULE,
    TERMINATING_SCHEDULE,
    JobSchedule,
    duration_of,
    normalize_job_specification,
    normalize_schedule_body,
    normalize_timing,
    schedule_being_deleted,
    schedule_being_terminated,
    schedule_completed,
    schedule_exists,
    schedule_not_found,
    time_of,
)
from .jobs import ACTIVE_JOB, COMPLETED_JOB, DELETING, Job

_UPDATABLE = ("schedule", "jobSpecification", "metadata")


class JobScheduleOperations:
    def __init__(self, account: Account, jobs: JobOperations) -> None:
        self.account = account
        self.jobs = jobs
        jobs.completion_listeners.append(self._job_completed)

    def schedule(self, schedule_id: str) -> JobSchedule:
        schedule = self.account.job_schedules.get(schedule_id.lower())
        if schedule is None:
            raise schedule_not_found()
        return schedule

    # -- create, list, get, update --------------------------------------------------------------------
    def create_schedule(self, body: Any) -> JobSchedule:
        spec = normalize_schedule_body(body, self.jobs.auto_pool_spec)
        existing = self.account.job_schedules.get(spec["id"].lower())
        if existing is not None:
            raise schedule_being_deleted() if existing.state == DELETING_SCHEDULE else schedule_exists()
        quota = self.account.settings.job_quota
        if quota is not None and self.account.active_jobs() >= quota:
            raise active_job_quota_reached()
        schedule = JobSchedule(spec)
        schedule.next_run = time_of(schedule.timing, "doNotRunUntil") or schedule.creation_time
        self.account.job_schedules[schedule.key] = schedule
        self.advance(schedule, utcnow())
        return schedule

    def list_schedules(self) -> list[JobSchedule]:
        return sorted(self.account.job_schedules.values(), key=lambda item: item.key)

    def list_jobs(self, schedule_id: str) -> list[Job]:
        schedule = self.schedule(schedule_id)
        return sorted(self._jobs_of(schedule), key=lambda job: (job.creation_time, job.key))

    def update_schedule(self, schedule_id: str, body: Any, replace: bool) -> JobSchedule:
        """PATCH changes what the body names; PUT replaces all of it (recorded: a PUT without
        ``onAllTasksComplete`` brings back its default)."""
        schedule = self._changeable(schedule_id)
        if not isinstance(body, dict):
            raise invalid_property("jobSchedule", body, "The body must be a JSON object.")
        changes: dict[str, Any] = {}
        if "schedule" in body or replace:
            changes["schedule"] = normalize_timing(body.get("schedule") or {})
        if "jobSpecification" in body or replace:
            if replace and body.get("jobSpecification") is None:
                raise invalid_property("jobSpecification", None, "A replaced job schedule needs jobSpecification.")
            changes["jobSpecification"] = normalize_job_specification(
                body["jobSpecification"], self.jobs.auto_pool_spec
            )
        if "metadata" in body or replace:
            changes["metadata"] = body.get("metadata")
        for name, value in changes.items():
            if value is None:
                schedule.spec.pop(name, None)
            else:
                schedule.spec[name] = value
        if "schedule" in changes:
            self._reschedule(schedule)
        schedule.touch()
        self.advance(schedule, utcnow())
        return schedule

    def _reschedule(self, schedule: JobSchedule) -> None:
        """The next interval under the new timing: one interval after the last job's (the recorded
        ``nextRunTime`` after an update), else from ``doNotRunUntil`` or now."""
        interval = self._scaled(duration_of(schedule.timing, "recurrenceInterval"))
        if schedule.last_run is None:
            schedule.next_run = time_of(schedule.timing, "doNotRunUntil") or utcnow()
        else:
            schedule.next_run = None if interval is None else schedule.last_run + interval

    def _changeable(self, schedule_id: str) -> JobSchedule:
        schedule = self.schedule(schedule_id)
        if schedule.state == DELETING_SCHEDULE:
            raise schedule_being_deleted()
        if schedule.state == COMPLETED_SCHEDULE:
            raise schedule_completed()
        if schedule.state == TERMINATING_SCHEDULE:
            raise schedule_being_terminated()
        return schedule

    # -- disable, enable, terminate, delete -----------------------------------------------------------
    def disable_schedule(self, schedule_id: str) -> JobSchedule:
        """No new job is made while disabled; the running one goes on."""
        schedule = self._changeable(schedule_id)
        if schedule.state != DISABLED_SCHEDULE:
            schedule.set_state(DISABLED_SCHEDULE)
            schedule.touch()
        return schedule

    def enable_schedule(self, schedule_id: str) -> JobSchedule:
        schedule = self._changeable(schedule_id)
        if schedule.state != ACTIVE_SCHEDULE:
            schedule.set_state(ACTIVE_SCHEDULE)
            schedule.touch()
            self.advance(schedule, utcnow())
        return schedule

    def terminate_schedule(self, schedule_id: str) -> JobSchedule:
        """Terminating a schedule terminates its active job; it is completed once that job has ended."""
        schedule = self.schedule(schedule_id)
        if schedule.state == DELETING_SCHEDULE:
            raise schedule_being_deleted()
        if schedule.state == COMPLETED_SCHEDULE:
            raise schedule_completed()
        if schedule.state != TERMINATING_SCHEDULE:
            schedule.touch()
            schedule.set_state(TERMINATING_SCHEDULE)
            for job in self._jobs_of(schedule):
                if job.state == ACTIVE_JOB or job.state in ("disabling", "disabled", "enabling"):
                    self.jobs.begin_terminate(job, "UserTerminate")
        self._complete_if_done(schedule, utcnow())
        return schedule

    def delete_schedule(self, schedule_id: str) -> None:
        """The schedule and all its jobs and their tasks are deleted (REST reference, Delete Job Schedule)."""
        schedule = self.schedule(schedule_id)
        if schedule.state == DELETING_SCHEDULE:
            return
        schedule.set_state(DELETING_SCHEDULE)
        self.account.spawn(self._delete(schedule))

    async def _delete(self, schedule: JobSchedule) -> None:
        for job in self._jobs_of(schedule):
            self.jobs.delete_job(job.id)
        while any(True for _ in self._jobs_of(schedule)):
            await asyncio.sleep(self.account.settings.tick_seconds)
        await asyncio.sleep(self.account.settings.delete_seconds)
        if self.account.job_schedules.get(schedule.key) is schedule:
            del self.account.job_schedules[schedule.key]

    # -- the scheduler --------------------------------------------------------------------------------
    def tick(self) -> None:
        now = utcnow()
        for schedule in list(self.account.job_schedules.values()):
            self.advance(schedule, now)

    def _job_completed(self, job: Job) -> None:
        """A schedule's job ended: the schedule may complete, or its waiting interval start, at once."""
        schedule = self.account.job_schedules.get((job.schedule_id or "").lower())
        if schedule is not None:
            self.advance(schedule, utcnow())

    def advance(self, schedule: JobSchedule, now: datetime) -> None:
        """Make the job of each interval that is due, as far as the schedule's state and its active job let."""
        if schedule.state == ACTIVE_SCHEDULE:
            timing = schedule.timing
            interval = self._scaled(duration_of(timing, "recurrenceInterval"))
            window = self._scaled(duration_of(timing, "startWindow"))
            if interval is not None:
                window = interval if window is None else min(window, interval)
            not_after = time_of(timing, "doNotRunAfter")
            while schedule.next_run is not None and now >= schedule.next_run:
                due = schedule.next_run
                if not_after is not None and due > not_after:
                    schedule.next_run = None
                elif window is not None and now >= due + window:
                    schedule.next_run = None if interval is None else due + interval  # its chance is gone
                elif self._active_job(schedule) is not None:
                    break  # it waits for the job before it
                else:
                    self._make_job(schedule, due)
                    schedule.next_run = None if interval is None else due + interval
            if not_after is not None and schedule.next_run is not None and schedule.next_run > not_after:
                schedule.next_run = None
        self._complete_if_done(schedule, now)

    def _make_job(self, schedule: JobSchedule, due: datetime) -> None:
        spec = {"id": schedule.next_job_id(), **copy.deepcopy(schedule.spec["jobSpecification"])}
        self.jobs.add_job(spec, schedule_id=schedule.id)
        schedule.recent_job = spec["id"]
        schedule.last_run = due

    def _complete_if_done(self, schedule: JobSchedule, now: datetime) -> None:
        """Completed when no job is to come (terminated, past ``doNotRunAfter``, or its one job made) and none
        is active."""
        if schedule.state not in (ACTIVE_SCHEDULE, TERMINATING_SCHEDULE):
            return
        not_after = time_of(schedule.timing, "doNotRunAfter")
        finished = (
            schedule.state == TERMINATING_SCHEDULE
            or schedule.next_run is None
            or (not_after is not None and now > not_after)
        )
        if finished and self._active_job(schedule) is None:
            schedule.set_state(COMPLETED_SCHEDULE)
            schedule.end_time = schedule.state_time
            schedule.next_run = None

    def _jobs_of(self, schedule: JobSchedule) -> list[Job]:
        return [job for job in self.account.jobs.values() if (job.schedule_id or "").lower() == schedule.key]

    def _active_job(self, schedule: JobSchedule) -> Job | None:
        return next(
            (job for job in self._jobs_of(schedule) if job.state not in (COMPLETED_JOB, DELETING)),
            None,
        )

    def _scaled(self, value: timedelta | None) -> timedelta | None:
        return None if value is None else value / self.account.settings.schedule_time_scale

"""An app as read from Batch: its jobs, roles and replicas, and what each replica's state, files and end are.
Values and the rules that make them from what Batch answers; no I/O (:mod:`.replicas` reads them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from torchx.specs import AppState

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.model.records import TaskCounts
from airflow_provider_azbatch.torchx.files import Files
from airflow_provider_azbatch.torchx.records import Record
from airflow_provider_azbatch.torchx.states import CANCEL_REASONS, ENDED_JOB_STATES, Carrier

if TYPE_CHECKING:
    from azure.batch.models import BatchJob, BatchTask, BatchTaskExecutionInfo

    from airflow_provider_azbatch.hooks.storage import LogLocation


@dataclass
class Replica:
    role: str
    role_index: int
    task_id: str
    index: int
    job_id: str = ""  # the Batch job its role's task is in
    state: AppState = AppState.UNKNOWN
    exit_code: int | None = None
    restarts: int = 0
    node_id: str = ""
    host: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    record: Record | None = None
    # Where its files are now (None: nowhere yet, or gone), and where they are kept once its node is gone;
    # whether it has ended (its files grow no more).
    files: Files | None = None
    kept: Files | None = None
    done: bool = False
    # Why its files are gone, when they cannot be read once it has ended.
    why_gone: str | None = None
    failure: str | None = None  # Batch's failure code and message, when Batch failed it


@dataclass
class Role:
    name: str
    index: int
    task_id: str
    num_replicas: int
    entrypoint: str
    image: str = ""
    replicas: list[Replica] = field(default_factory=list)
    job_id: str = ""  # the Batch job its task is in (the app's, or another pool's)


@dataclass
class Job:
    """One of the app's Batch jobs as read: the app's own, or one of its other pools' (roles of another size)."""

    job_id: str
    state: str | None
    terminate_reason: str | None
    pool_id: str | None
    auto_pool: bool

    @property
    def ended(self) -> bool:
        return self.state in ENDED_JOB_STATES


@dataclass
class App:
    job_id: str
    job_state: str | None
    terminate_reason: str | None
    metadata: dict[str, str]
    roles: list[Role]
    state: AppState
    location: LogLocation | None
    pool_id: str | None
    auto_pool: bool
    # The app's jobs by id, its own first; more than one when its roles run on pools of different VM sizes.
    jobs: dict[str, Job] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        if self.jobs:
            return all(job.ended for job in self.jobs.values())
        return self.job_state in ENDED_JOB_STATES

    @property
    def cancelled(self) -> bool:
        return self.terminate_reason in CANCEL_REASONS or any(
            job.terminate_reason in CANCEL_REASONS for job in self.jobs.values()
        )

    def replicas(self) -> Iterator[Replica]:
        for role in self.roles:
            yield from role.replicas

    def replica(self, role_name: str, k: int) -> Replica | None:
        role = next((role for role in self.roles if role.name == role_name), None)
        return role.replicas[k] if role is not None and 0 <= k < len(role.replicas) else None


def why_gone(app: App, replica: Replica, *, has_storage: bool) -> str:
    """Why a replica's output cannot be read, if it cannot: where it was, and why nothing was kept."""
    who = f"The output of role '{replica.role}' replica {replica.index}"
    job = app.jobs.get(replica.job_id)
    pool_id, auto_pool = (job.pool_id, job.auto_pool) if job is not None else (app.pool_id, app.auto_pool)
    if auto_pool:
        where = f"its node went with the pool made for the app ({pool_id}), which Batch deletes with the job"
    else:
        where = f"its node in pool {pool_id} no longer has it (removed, or the task's files cleaned up)"
    if app.location is not None and not has_storage:
        kept = (
            f"and it was kept in Blob container {app.location.container}, but this account's connection has no "
            "storage account to read it with (storage_account_url)"
        )
    elif app.location is not None:
        uploader = (
            "Batch uploads replica 0's when its task ends"
            if replica.index == 0
            else "the job release task uploads the other replicas' when the job ends"
        )
        kept = f"and it is not in Blob container {app.location.container}, where it was to be kept ({uploader})"
    elif has_storage:
        kept = "and it was not kept: the app ran with log_container empty"
    else:
        kept = (
            "and it was not kept: the Batch account has no storage account (give the connection "
            "storage_account_url; the output is then kept in log_container)"
        )
    return f"{who} is gone: {where}, {kept}"


def job_of(job_id: str, job: BatchJob) -> Job:
    pool_info = getattr(job, "pool_info", None)
    return Job(
        job_id=job_id,
        state=enum_value(job.state) if job.state is not None else None,
        terminate_reason=getattr(job.execution_info, "termination_reason", None),
        pool_id=getattr(job.execution_info, "pool_id", None) or getattr(pool_info, "pool_id", None),
        auto_pool=getattr(pool_info, "auto_pool_specification", None) is not None,
    )


# How the states of an app's jobs make the app's: the first of these any job is in, else SUCCEEDED.
_PRECEDENCE = (AppState.FAILED, AppState.CANCELLED, AppState.UNKNOWN, AppState.RUNNING, AppState.PENDING)


def combined(states: list[AppState]) -> AppState:
    if len(states) == 1:
        return states[0]
    return next((state for state in _PRECEDENCE if state in states), AppState.SUCCEEDED)


def carrier_of(state: str | None, info: BatchTaskExecutionInfo | None) -> Carrier:
    result = getattr(info, "result", None)
    failure = getattr(info, "failure_info", None)
    return Carrier(
        state,
        enum_value(result) if result is not None else None,
        getattr(info, "exit_code", None),
        getattr(failure, "code", None),
    )


def counts_of(tasks: Iterable[BatchTask]) -> TaskCounts:
    """The job's task counts, from its task listing (as Batch counts them: preparing is running)."""
    active = running = completed = succeeded = 0
    for task in tasks:
        state = enum_value(task.state) if task.state is not None else None
        if state == "completed":
            completed += 1
            result = getattr(task.execution_info, "result", None)
            succeeded += result is not None and enum_value(result) == "success"
        elif state in ("running", "preparing"):
            running += 1
        else:
            active += 1
    return TaskCounts(active, running, completed, succeeded, completed - succeeded)

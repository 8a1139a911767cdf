"""A TorchX AppDef as the operator's :class:`~airflow_provider_azbatch.submission.request.JobRequest`: the app's
Batch job (or a job per pool, when its roles name different VM sizes), checked as the operator's requests are.

- Each role is one Batch task (its id from the role's name, its display name the name itself): :mod:`.tasks`;
  each role's container: :mod:`.containers`; the pools from the roles' resources: :mod:`.resources`.
- The job fails fast: the first role (or replica 0) that fails after its retries ends it (Batch's own
  ``fail_fast``); a replica other than 0 is seen failing by ``describe``, which ends the job then.
- ``metadata`` is the job's, with the app's name, roles and user (what ``describe`` and ``list`` read back).
- With the output kept (a storage account, ``log_container``), replica 0's record is uploaded with its output,
  and the other replicas' by the job release task.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

from torchx.specs import AppDef, Role

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.specs.blob_io import OutputSpec
from airflow_provider_azbatch.specs.job_side_tasks import PREPARATION, RELEASE, JobSideTask
from airflow_provider_azbatch.specs.options import BlobOptions, ContainerOptions
from airflow_provider_azbatch.specs.validation import MAX_ID_LENGTH
from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.submission.request import JobRequest
from airflow_provider_azbatch.torchx import node
from airflow_provider_azbatch.torchx.containers import container_setup
from airflow_provider_azbatch.torchx.names import (
    ALL_USERS,
    APP_METADATA_KEY,
    JOB_ID_PREFIX,
    JOBS_METADATA_KEY,
    PART_OF_METADATA_KEY,
    ROLES_METADATA_KEY,
    USER_METADATA_KEY,
    current_user,
)
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError
from airflow_provider_azbatch.torchx.resources import node_size, pool_of, pool_parts
from airflow_provider_azbatch.torchx.tasks import role_task, role_workspace

if TYPE_CHECKING:
    from typing_extensions import Unpack

# Where the output is kept in the log container: <prefix>/<job>/<task>/ (LogLocation).
LOGS_PREFIX = "torchx"
# The app's jobs after the first (one per pool of another VM size): <job id>-p2 ... -p9.
PART_SUFFIX = "-p9"


class _AppJob(TypedDict):
    job_id: str
    app_id: str
    has_storage: bool
    note: Callable[[str], None]


class AppJob(_AppJob, total=False):
    """Which of the app's jobs a request is, and what it is told: its job id, the app's id (its macro), whether the
    account has a storage account (workspaces are shipped and logs kept there), where notes for the person
    running it go, and who it is run for (default: the ``user`` option, else this process's login name), kept in
    the job's metadata for ``torchx list``."""

    user: str | None


def new_job_id(app_name: str) -> str:
    """``torchx-<app name>-<random>``: unique, and found by `torchx list` through its prefix; short enough for
    the ids of the app's other jobs (:func:`part_job_id`)."""
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))
    head = _clean(app_name, MAX_ID_LENGTH - len(PART_SUFFIX) - len(JOB_ID_PREFIX) - len(suffix) - 1) or "app"
    return f"{JOB_ID_PREFIX}{head}-{suffix}"


def _clean(name: str, limit: int) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:limit].strip("-")


def task_ids(roles: list[Role]) -> list[str]:
    """A Batch task id per role, unique without case (the service compares ids so)."""
    ids: list[str] = []
    for index, role in enumerate(roles):
        task_id = _clean(role.name, MAX_ID_LENGTH) or f"role-{index}"
        if task_id.lower() in {seen.lower() for seen in ids}:
            task_id = f"{task_id[: MAX_ID_LENGTH - 4]}-{index}"
        ids.append(task_id)
    return ids


def part_job_id(job_id: str, part: int) -> str:
    """The id of the app's job on its ``part``-th pool (0: the app's own id)."""
    return job_id if part == 0 else f"{job_id}-p{part + 1}"


def job_request(
    app: AppDef,
    opts: AzureBatchOpts,
    *,
    workspace: Workspace | None = None,
    part: _Part | None = None,
    **job: Unpack[AppJob],
) -> JobRequest:
    """The Batch job of the app, checked as the operator's requests are (nothing submitted, no I/O).

    ``workspace``: one for every role (a DAG's), over the roles' own; ``part``: ``app`` is the roles of one of
    the app's pools (:func:`job_requests`).
    """
    if not app.roles:
        raise AzureBatchValidationError("app", f"'{app.name}' has no roles")
    pool = pool_of(app, opts)
    keep_logs = job["has_storage"] and bool(opts.log_container)
    ids = part.task_ids if part is not None else task_ids(app.roles)
    tasks = _tasks(app, opts, pool, ids, job, workspace=workspace, part=part, keep_logs=keep_logs)
    metadata = _metadata(app, opts, ids, job.get("user"), part)
    if not keep_logs and pool.kind == "auto":
        job["note"](
            "The output is not kept after the app ends: its pool goes with it, and "
            + (
                "log_container is empty"
                if job["has_storage"]
                else "the Batch account has no storage account to keep it in"
            )
            + "; torchx log reads it while the app runs"
        )
    # The other replicas' output and records, uploaded from their nodes when the job ends (see .node).
    preparation = release = None
    if keep_logs and any(role.num_replicas > 1 for role in app.roles):
        preparation = JobSideTask(PREPARATION, node.PREPARATION_COMMAND)
        release = JobSideTask(RELEASE, node.RELEASE_COMMAND, log_upload=True)
    if opts.priority is not None and not -1000 <= opts.priority <= 1000:
        raise TorchXOptionError("priority", f"is {opts.priority}: give -1000 to 1000")
    request = JobRequest(
        pool=pool,
        tasks=tasks,
        # Each role's container run options (mounts, /dev/shm, InfiniBand, its own) are its task's.
        containers=ContainerOptions(registry_conn_id=opts.registry_conn_id),
        blob=BlobOptions(output_container=opts.log_container if keep_logs else None, logs_prefix=LOGS_PREFIX),
        job_id=job["job_id"],
        display_name=app.name,
        metadata=metadata,
        priority=opts.priority,
        job_max_wall_clock=timedelta(seconds=opts.max_wall_clock) if opts.max_wall_clock else None,
        # The first role or replica 0 that fails (after its retries) ends the app; describe ends it for the others.
        fail_fast=True,
        job_preparation=preparation,
        job_release=release,
    )
    request.check(rendered=True)
    return request


def _tasks(
    app: AppDef,
    opts: AzureBatchOpts,
    pool: BatchPool,
    ids: list[str],
    job: AppJob,
    *,
    workspace: Workspace | None,
    part: _Part | None,
    keep_logs: bool,
) -> list[dict[str, object]]:
    """A Batch task per role, each with its container's setup on the pool's nodes."""
    vm = node_size(pool, opts)
    setups = [container_setup(role, opts, vm) for role in app.roles]
    location = LogLocation(opts.log_container, LOGS_PREFIX) if keep_logs else None
    return [
        role_task(
            role,
            task_id,
            job["app_id"],
            workspace=workspace or role_workspace(role, job["has_storage"], job["note"], skip=opts.skip_workspace),
            containers=opts.containers,
            single_role=part.single_role if part is not None else len(app.roles) == 1,
            records=_records(location, job["job_id"], task_id),
            run_options=run_options,
            environment=environment,
        )
        for role, task_id, (run_options, environment) in zip(app.roles, ids, setups, strict=True)
    ]


def _metadata(
    app: AppDef, opts: AzureBatchOpts, ids: list[str], user: str | None, part: _Part | None
) -> dict[str, str]:
    """The job's metadata: the app's own, its name, its roles (what describe reads back) and who runs it."""
    roles = [
        [role.name, task_id, role.num_replicas, role.entrypoint] for role, task_id in zip(app.roles, ids, strict=True)
    ]
    user = user or opts.user or current_user()
    if user == ALL_USERS:
        raise TorchXOptionError("user", f"is '{ALL_USERS}', which only torchx list takes: name one user")
    return {
        **app.metadata,
        APP_METADATA_KEY: app.name,
        ROLES_METADATA_KEY: json.dumps(roles),
        USER_METADATA_KEY: user,
        **(part.metadata if part is not None else {}),
    }


def _records(location: LogLocation | None, job_id: str, task_id: str) -> OutputSpec | None:
    """Replica 0's record and time index, uploaded beside its stdout and stderr (when the output is kept)."""
    if location is None:
        return None
    return OutputSpec(
        pattern=f"../{node.RECORDS_PATTERN}",
        container=location.container,
        path=location.path(job_id, task_id),
        upload="completion",
    )


@dataclass(frozen=True)
class _Part:
    """What one of an app's jobs shares with the others: the roles' task ids, whether the app has one role,
    and the metadata that ties the jobs together."""

    task_ids: list[str]
    single_role: bool
    metadata: dict[str, str]


def job_requests(app: AppDef, opts: AzureBatchOpts, **job: Unpack[AppJob]) -> list[JobRequest]:
    """The app's Batch jobs: one, or one per pool when its roles name different VM sizes (:func:`pool_parts`).

    Every role runs at once on its own pool; the first job (whose id is ``job_id``, the app's) lists the
    others, and ``describe`` reads them all as one app (and ends the others when one fails)."""
    if not app.roles:
        raise AzureBatchValidationError("app", f"'{app.name}' has no roles")
    parts = pool_parts(app, opts)
    if len(parts) == 1:
        return [job_request(app, opts, **job)]
    ids = task_ids(app.roles)
    jobs = [part_job_id(job["job_id"], index) for index in range(len(parts))]
    job_of = {role: jobs[index] for index, part in enumerate(parts) for role in part}
    every_role = json.dumps(
        [
            [role.name, ids[index], role.num_replicas, role.entrypoint, job_of[index]]
            for index, role in enumerate(app.roles)
        ]
    )
    said: set[str] = set()

    def once(message: str) -> None:
        if message not in said:
            said.add(message)
            job["note"](message)

    requests = []
    for index, part in enumerate(parts):
        ties = {ROLES_METADATA_KEY: every_role}
        ties |= {JOBS_METADATA_KEY: json.dumps(jobs[1:])} if index == 0 else {PART_OF_METADATA_KEY: job["job_id"]}
        each = job.copy()
        each["job_id"], each["note"] = jobs[index], once
        roles = AppDef(app.name, roles=[app.roles[role] for role in part], metadata=app.metadata)
        requests.append(
            job_request(roles, opts, part=_Part([ids[role] for role in part], len(app.roles) == 1, ties), **each)
        )
    return requests

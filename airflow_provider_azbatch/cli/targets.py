"""Which job a command is about: its id, or the Airflow task instance that submitted it.

A task instance's jobs have the operator's deterministic ids: ``<base>``, ``<base>-a2``, ``<base>-a3``...
(``<base>`` from DAG, task, run and map index; a later attempt follows a job that failed). The latest that
exists is the task instance's job. A job submitted with an explicit ``job_id`` is found by the metadata
the operator stores on it (``airflow_dag_id``, ``airflow_task_id``, ``airflow_run_id``, ``airflow_map_index``).
"""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.cli.command import CliError, UsageError
from airflow_provider_azbatch.submission.job_ids import (
    TaskInstanceRef,
    attempt_job_id,
    default_job_id,
)

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


def metadata_of(job: Any) -> dict[str, str]:
    return {item.name: item.value for item in (getattr(job, "metadata", None) or []) if item.name}


def task_instance_of(args: Namespace) -> TaskInstanceRef | None:
    """The ``--dag-id/--task-id/--run-id[/--map-index]`` given, or None if none of them is."""
    given = {"--dag-id": args.dag_id, "--task-id": args.task_id, "--run-id": args.run_id}
    if not any(given.values()):
        return None
    missing = [flag for flag, value in given.items() if not value]
    if missing:
        raise UsageError(
            f"{' and '.join(missing)} missing: a task instance is named by --dag-id, --task-id and --run-id "
            "(and --map-index for a mapped task)"
        )
    return TaskInstanceRef(args.dag_id, args.task_id, args.run_id, args.map_index)


def job_id_of(hook: AzureBatchHook, args: Namespace, job_id: str | None) -> str:
    """The job the command is about: ``job_id``, or the latest job of the task instance in ``args``."""
    task_instance = task_instance_of(args)
    if job_id and task_instance:
        raise UsageError("give a Batch job id or --dag-id/--task-id/--run-id, not both")
    if job_id:
        return job_id
    if task_instance is None:
        raise UsageError(
            "give a Batch job id, or the Airflow task instance that submitted it: --dag-id, --task-id and --run-id"
        )
    return latest_job_of(hook, task_instance)


def latest_job_of(hook: AzureBatchHook, ti: TaskInstanceRef) -> str:
    base = default_job_id(ti.dag_id, ti.task_id, ti.run_id, ti.map_index)
    found = None
    attempt = 1
    while True:
        candidate = base if attempt == 1 else attempt_job_id(base, attempt)
        if hook.get_job(candidate, select=["id"]) is None:
            break
        found = candidate
        attempt += 1
    if found is not None:
        return found
    # Submitted with an explicit job_id: the operator's metadata says whose it is.
    jobs = [job for job in hook.list_jobs(select=["id", "creationTime", "metadata"]) if ti.matches(metadata_of(job))]
    if jobs:
        return str(max(jobs, key=lambda job: job.creation_time).id)
    raise CliError(
        f"No Batch job of {ti.describe()} in Batch account '{hook.account_name}' (looked for job {base}, its later "
        "attempts, and jobs with that task instance in their metadata)"
    )

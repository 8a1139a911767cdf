"""From a checked request to a :class:`~airflow_provider_azbatch.submission.job.JobSubmission`: the I/O before
anything is submitted (registry credentials, storage access, workspaces staged, the pool made ready)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.pools.ready import prepare_pool
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.specs.containers import RegistryCredentials
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.specs.workspace import METADATA_KEY as WORKSPACE_METADATA_KEY
from airflow_provider_azbatch.specs.workspace import STAGED_METADATA_KEY
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.job_ids import TaskInstanceRef, default_job_id, task_instance_metadata
from airflow_provider_azbatch.submission.request import CheckedRequest, JobRequest
from airflow_provider_azbatch.submission.task_extras import registry_credentials, task_extras
from airflow_provider_azbatch.watching.preemption import spot_watch
from airflow_provider_azbatch.workspace.staged_files import stage_files
from airflow_provider_azbatch.workspace.staging import stage_workspaces

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


def build_submission(
    hook: AzureBatchHook, request: JobRequest, where: TaskInstanceRef | None, log: Log
) -> JobSubmission:
    """Everything checked and prepared (pool, storage access, registry) before anything is submitted.

    ``where``: the Airflow task instance submitting; None outside Airflow (the TorchX scheduler: the request
    names its job, and relative workspaces are found from the current directory)."""
    checked = request.check(rendered=True)
    specs, metadata = checked.specs, checked.metadata
    if where is None:
        if not request.job_id:
            raise ValueError("a job submitted outside an Airflow task needs its job_id")
        job_id = str(request.job_id)
        base_dir = Path(".")
    else:
        job_id = request.job_id or default_job_id(where.dag_id, where.task_id, where.run_id, where.map_index)
        # Which task instance submitted the job: the command line finds and filters jobs by it.
        metadata.update(task_instance_metadata(where.dag_id, where.task_id, where.run_id, where.map_index))
        base_dir = where.dag_folder
    sas_lifetime = timedelta(hours=config.get_float("sas_hours"))
    registry = registry_credentials(hook, request.containers)
    side_tasks = [side for side in (checked.job_preparation, checked.job_release) if side is not None]
    extras = task_extras(
        hook,
        [*specs, *side_tasks],
        request.containers,
        registry,
        request.blob,
        checked.inputs,
        checked.outputs,
        sas_lifetime,
    )
    extras.files = stage_files(hook, request.files_for_tasks, sas_lifetime, log)
    extras.workspaces, packed = stage_workspaces(
        hook, [*specs, *side_tasks], checked.workspace, base_dir, sas_lifetime, log
    )
    pool_id, auto_pool = prepare_request_pool(hook, request, checked, registry, log)
    if packed:
        metadata[WORKSPACE_METADATA_KEY] = ",".join(workspace.sha256 for workspace in packed)
    staged = [(item.container, item.blob) for item in extras.files]
    staged += [(item.container, item.blob) for item in extras.workspaces.values()]
    if staged:
        # What the tasks read besides their inputs, kept with the job for lineage (in the order staged, once each).
        blobs = dict.fromkeys(f"{container}/{blob}" for container, blob in staged if container)
        metadata[STAGED_METADATA_KEY] = ",".join(blobs)
    log_location = LogLocation(extras.log_container, request.blob.logs_prefix) if extras.log_container else None
    if log_location is not None:
        # Kept with the job, so that anyone watching it later (the sensor, the CLI) finds its uploaded logs.
        metadata[LogLocation.METADATA_KEY] = log_location.to_metadata()
    return JobSubmission(
        job_id=job_id,
        pool_id=pool_id,
        tasks=specs,
        environment={**request.containers.environment(), **checked.environment},
        metadata=metadata,
        default_retries=request.max_task_retries,
        default_wall_clock=request.max_wall_clock,
        job_max_wall_clock=request.job_max_wall_clock,
        display_name=checked.display_name,
        max_parallel_tasks=request.max_parallel_tasks,
        auto_pool=auto_pool,
        auto_pool_prefix=request.pool.auto_pool_prefix,
        extras=extras,
        log_location=log_location,
        priority=checked.priority,
        run_as=checked.run_as,
        job_overrides=checked.job_overrides,
        task_overrides=checked.task_overrides,
        fail_fast=request.fail_fast,
        default_exit_conditions=checked.exit_conditions,
        default_skip_codes=request.skip_codes,
        job_preparation=checked.job_preparation,
        job_release=checked.job_release,
        default_result_file=request.result_file,
        spot=spot_watch_of(hook, request.pool, pool_id, specs),
    )


def prepare_request_pool(
    hook: AzureBatchHook,
    request: JobRequest,
    checked: CheckedRequest,
    registry: RegistryCredentials | None,
    log: Log,
    strategy: BatchPool | None = None,
) -> tuple[str | None, dict[str, Any] | None]:
    """The request's pool (or ``strategy``, another for the same tasks) ready: see ``prepare_pool``."""
    side_tasks = [side for side in (checked.job_preparation, checked.job_release) if side is not None]
    return prepare_pool(
        hook,
        strategy or request.pool,
        checked.specs,
        job_image=request.containers.image,
        registry=registry,
        log=log,
        run_as=[checked.run_as, *(spec.run_as for spec in checked.specs), *(side.run_as for side in side_tasks)],
    )


# An autoscale formula that may ask for Spot nodes: it assigns their target something else than 0.
_SPOT_FORMULA = re.compile(r"\$TargetLowPriority(?:Nodes)?\s*=(?!\s*0\s*;)")


def spot_watch_of(
    hook: AzureBatchHook, strategy: BatchPool, pool_id: str | None, specs: list[TaskSpec]
) -> dict[str, Any] | None:
    """What the watch keeps of a job whose pool may have Spot nodes (its tasks' requeues), or None."""
    task_nodes = {spec.id: spec.num_nodes for spec in specs if spec.num_nodes > 1}
    if strategy.kind != "existing":
        if strategy.requirements is None or not strategy.requirements.low_priority:
            return None
        fallback = strategy.spot_fallback.to_watch() if strategy.spot_fallback is not None else None
        return spot_watch(fallback, task_nodes, strategy.kind)
    pool = hook.get_pool(pool_id, select=SPOT_SELECT) if pool_id else None
    if pool is None:
        return None
    spot = bool(pool.target_low_priority_nodes or pool.current_low_priority_nodes) or bool(
        pool.enable_auto_scale and _SPOT_FORMULA.search(pool.auto_scale_formula or "")
    )
    return spot_watch(None, task_nodes, "existing") if spot else None


SPOT_SELECT = ["id", "targetLowPriorityNodes", "currentLowPriorityNodes", "enableAutoScale", "autoScaleFormula"]

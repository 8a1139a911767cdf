"""Moving a job to dedicated nodes (the Spot fallback, :mod:`airflow_provider_azbatch.runs.spot_fallback`): the job
to another pool, or its pool to dedicated nodes. Requests of :class:`~.batch.AzureBatchHook`."""

from __future__ import annotations

import time
from collections.abc import Callable

from azure.batch import BatchClient
from azure.batch import models as batch_models
from azure.core.exceptions import ResourceExistsError

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.errors import error_code
from airflow_provider_azbatch.model.records import JobStatus

# Polling interval for the SDK's long-running operations (its default is 5 s).
LRO_POLL_SECONDS = 1
# azure-core repeats GET/PUT/DELETE after a dropped connection, not POST/PATCH. Ours are idempotent
# (deterministic ids, TaskExists counts as added), so it may repeat them too (a per-call pipeline option).
RETRY_ALL_METHODS = frozenset({"HEAD", "GET", "PUT", "DELETE", "OPTIONS", "TRACE", "POST", "PATCH"})


def move_job_to_pool(
    client: BatchClient, job_id: str, pool_id: str, job_status: Callable[[str], JobStatus | None]
) -> None:
    """Run the job's remaining tasks on another pool: disabled (its running tasks requeued), given the pool,
    enabled again; Batch lets a job change pools only while it is disabled."""
    try:
        poller = client.begin_disable_job(
            job_id,
            batch_models.BatchJobDisableOptions(disable_tasks=batch_models.DisableBatchJobOption.REQUEUE),
            polling_interval=LRO_POLL_SECONDS,
        )
    except ResourceExistsError as exc:
        if error_code(exc) != "JobNotActive":  # disabling or disabled already: a repeated move
            raise
        poller = None
    if poller is not None:
        poller.result()
    else:
        _wait_for_job_state(job_status, job_id, "disabled")
    client.update_job(
        job_id,
        batch_models.BatchJobUpdateOptions(pool_info=batch_models.BatchPoolInfo(pool_id=pool_id)),
        retry_on_methods=RETRY_ALL_METHODS,
    )
    client.begin_enable_job(job_id, polling_interval=LRO_POLL_SECONDS).result()


def _wait_for_job_state(
    job_status: Callable[[str], JobStatus | None], job_id: str, state: str, timeout: float = 300.0
) -> None:
    deadline = time.monotonic() + timeout
    while (status := job_status(job_id)) is not None and status.state != state:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Batch job {job_id} did not become {state} within {timeout:.0f} s")
        time.sleep(LRO_POLL_SECONDS)


def retarget_pool(client: BatchClient, pool_id: str, *, formula: str | None, dedicated_nodes: int) -> None:
    """Turn a pool to dedicated nodes: an autoscaled one gets ``formula``; a fixed one stops seeking nodes and
    asks for ``dedicated_nodes`` and no Spot nodes (nodes that go finish their tasks first)."""
    if formula is not None:
        client.enable_pool_auto_scale(
            pool_id,
            batch_models.BatchPoolEnableAutoScaleOptions(auto_scale_formula=formula),
            retry_on_methods=RETRY_ALL_METHODS,
        )
        return
    pool = client.get_pool(pool_id, select=["allocationState"])
    if enum_value(pool.allocation_state) != "steady":
        client.begin_stop_pool_resize(pool_id, polling_interval=LRO_POLL_SECONDS).result()
    client.begin_resize_pool(
        pool_id,
        batch_models.BatchPoolResizeOptions(
            target_dedicated_nodes=dedicated_nodes,
            target_low_priority_nodes=0,
            node_deallocation_option=batch_models.BatchNodeDeallocationOption.TASK_COMPLETION,
        ),
        polling_interval=LRO_POLL_SECONDS,
    )

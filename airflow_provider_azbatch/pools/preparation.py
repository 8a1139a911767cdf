"""Getting the job's pool ready before submission: an existing one checked, a shared one created if missing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_azbatch.compute import UnknownVmSizeError, check_vm_size_fits
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.pools.strategy import (
    BatchPool,
    PoolStrategyError,
    formula_outdated,
    images_not_prefetched,
    pool_differences,
)
from airflow_provider_azbatch.submission.containers import RegistryCredentials
from airflow_provider_azbatch.submission.tasks import TaskSpec


def task_images(specs: Sequence[TaskSpec], job_image: str | None) -> list[str]:
    """The container images the job's tasks run in, each once, in order of first use."""
    images = [spec.image or job_image for spec in specs]
    return list(dict.fromkeys(image for image in images if image))


def prepare_pool(
    hook: Any,
    strategy: BatchPool,
    specs: Sequence[TaskSpec],
    *,
    job_image: str | None,
    registry: RegistryCredentials | None,
    log: Any,
) -> tuple[str | None, dict[str, Any] | None]:
    """(pool id, auto-pool body): checks an existing pool, creates a shared one if missing."""
    multi_node = max(spec.num_nodes for spec in specs)
    images = task_images(specs, job_image)
    field = "pool_id" if strategy.kind == "existing" else "batch_pool"
    try:
        if strategy.kind == "existing":
            _check_existing(hook, strategy, log)
            return strategy.pool_id, None
        body = strategy.pool_body(
            containers=bool(images),
            multi_node=multi_node,
            registries=[registry.to_pool_json()] if registry is not None else [],
            task_images=images,
        )
    except PoolStrategyError as exc:
        raise AzureBatchValidationError(field, str(exc)) from None
    if strategy.kind == "auto":
        log.info("The job gets its own pool (%s), deleted with the job", body["vmSize"])
        return None, body
    assert strategy.pool_id is not None
    if hook.create_pool(strategy.pool_id, body):
        log.info("Created shared pool %s (%s)", strategy.pool_id, body["vmSize"])
        return strategy.pool_id, None
    _check_shared(hook, strategy.pool_id, body, images, log)
    log.info("Using shared pool %s", strategy.pool_id)
    return strategy.pool_id, None


def _check_shared(hook: Any, pool_id: str, body: dict[str, Any], images: list[str], log: Any) -> None:
    """An existing shared pool must be the pool this task would create; never silently reused otherwise."""
    existing = hook.get_pool(pool_id)
    if existing is None:
        raise AzureBatchValidationError("batch_pool", f"pool {pool_id!r} was deleted while this task looked at it")
    if enum_value(existing.state) == "deleting":
        raise AzureBatchValidationError(
            "batch_pool", f"pool {pool_id!r} is being deleted: wait for it to go, or use another pool id"
        )
    found = existing.as_dict()
    differences = pool_differences(found, body)
    if differences:
        raise AzureBatchValidationError(
            "batch_pool",
            f"pool {pool_id!r} already exists with a different specification: {'; '.join(differences)}. "
            "Use another pool id, or delete the pool so that it is created again",
        )
    if formula_outdated(found, body):
        log.warning(
            "Shared pool %s scales with another version of this provider's autoscale formula (the same bounds): it "
            "keeps its own. Delete the pool so that it is created with this version's",
            pool_id,
        )
    missing = images_not_prefetched(found, images)
    if missing:
        log.warning(
            "Shared pool %s does not pre-fetch %s: each node pulls it when its first task starts (paid, idle node "
            "time). Delete the pool so that it is created with it, or use another pool id",
            pool_id,
            ", ".join(missing),
        )


def _check_existing(hook: Any, strategy: BatchPool, log: Any) -> None:
    pool_id = strategy.pool_id
    pool = hook.get_pool(pool_id) if pool_id else None
    if pool is None:
        raise AzureBatchValidationError(
            "pool_id",
            f"{pool_id!r} does not exist in Batch account '{hook.account_name}': create the pool first or give the "
            "id of an existing one",
        )
    if strategy.requirements is None:
        return
    try:
        check_vm_size_fits(pool.vm_size, strategy.requirements)
    except UnknownVmSizeError:
        log.warning(
            "Pool %s has VM size %s, which is not in the provider's catalog: its fit to %s is not checked",
            pool_id,
            pool.vm_size,
            strategy.requirements.describe(),
        )
    except ValueError as exc:
        raise AzureBatchValidationError("batch_pool", f"pool {pool_id!r} does not fit this job: {exc}") from None

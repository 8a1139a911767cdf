"""What the operator prepares before submitting: the pool (checked or created) and, for every task,
container settings and Blob access (SAS URLs, log upload)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_azbatch.hooks.storage import LogLocation, StorageNotConfiguredError
from airflow_provider_azbatch.utils.containers import RegistryConfigError, RegistryCredentials
from airflow_provider_azbatch.utils.job_spec import TaskExtras, TaskSpec
from airflow_provider_azbatch.utils.pool_strategy import BatchPool, PoolStrategyError
from airflow_provider_azbatch.utils.task_io import InputSpec, OutputSpec


class SubmissionError(ValueError):
    """Something the submission needs is wrong or missing; the message says what to fix."""


@dataclass(frozen=True)
class ContainerOptions:
    image: str | None = None
    registry_conn_id: str | None = None
    run_options: str | None = None
    working_directory: str = "task"


@dataclass(frozen=True)
class BlobOptions:
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    output_container: str | None = None
    upload_logs: bool | None = None
    logs_prefix: str = "azbatch-logs"
    output_identity: str | None = None
    sas_lifetime: timedelta = timedelta(hours=24)


def task_extras(
    hook: Any, where: str, specs: Sequence[TaskSpec], containers: ContainerOptions, blob: BlobOptions
) -> TaskExtras:
    registry = None
    if containers.registry_conn_id:
        try:
            registry = RegistryCredentials.from_connection(hook.get_connection(containers.registry_conn_id))
        except RegistryConfigError as exc:
            raise SubmissionError(str(exc)) from None
    output_container = blob.output_container
    upload_logs = blob.upload_logs if blob.upload_logs is not None else output_container is not None
    if upload_logs and not output_container:
        raise SubmissionError(f"{where}: upload_logs needs output_container (where the logs go)")
    all_inputs = [*blob.inputs, *(item for spec in specs for item in spec.inputs)]
    all_outputs = [*blob.outputs, *(item for spec in specs for item in spec.outputs)]
    for index, output in enumerate(all_outputs):
        if not (output.container or output_container):
            raise SubmissionError(
                f"{where}: output {index} ({output.pattern!r}) has no container: set its container or the "
                "operator's output_container"
            )
    read_containers = sorted({item.container for item in all_inputs if item.container})
    write_containers = sorted(
        {item.container or output_container for item in all_outputs} | ({output_container} if upload_logs else set())
    )
    read_urls: dict[str, str] = {}
    write_urls: dict[str, str] = {}
    if read_containers or write_containers:
        try:
            storage = hook.blob_storage(f"{where}: Blob inputs and outputs")
        except StorageNotConfiguredError as exc:
            raise SubmissionError(str(exc)) from None
        read_urls = {name: storage.read_url(name, blob.sas_lifetime) for name in read_containers}
        for name in write_containers:
            storage.ensure_container(name)
            if not blob.output_identity:
                write_urls[name] = storage.write_url(name, blob.sas_lifetime)
    location = LogLocation(output_container, blob.logs_prefix) if upload_logs and output_container else None
    return TaskExtras(
        image=containers.image,
        registry=registry,
        container_run_options=containers.run_options,
        container_working_directory=containers.working_directory,
        inputs=tuple(blob.inputs),
        outputs=tuple(blob.outputs),
        output_container=output_container,
        read_urls=read_urls,
        write_urls=write_urls,
        output_identity=blob.output_identity,
        log_container=location.container if location else None,
        log_path=location.path if location else None,
    )


def prepare_pool(
    hook: Any, strategy: BatchPool, specs: Sequence[TaskSpec], extras: TaskExtras, log: Any
) -> tuple[str | None, dict[str, Any] | None]:
    """(pool id, auto-pool body): checks an existing pool, creates a shared one if missing."""
    multi_node = max(spec.num_nodes for spec in specs)
    containers = extras.image is not None or any(spec.image for spec in specs)
    try:
        if strategy.kind == "existing":
            check_existing_pool(hook, strategy, log)
            return strategy.pool_id, None
        registries = [_registry_json(extras.registry)] if extras.registry is not None else []
        body = strategy.pool_body(containers=containers, multi_node=multi_node, registries=registries)
    except PoolStrategyError as exc:
        raise SubmissionError(str(exc)) from None
    if strategy.kind == "auto":
        log.info("The job gets its own pool (%s), deleted with the job", body["vmSize"])
        return None, body
    assert strategy.pool_id is not None
    try:
        created = hook.ensure_shared_pool(strategy.pool_id, body)
    except PoolStrategyError as exc:
        raise SubmissionError(str(exc)) from None
    if created:
        log.info("Created shared pool %s (%s)", strategy.pool_id, body["vmSize"])
    else:
        log.info("Using shared pool %s", strategy.pool_id)
    return strategy.pool_id, None


def check_existing_pool(hook: Any, strategy: BatchPool, log: Any) -> None:
    from airflow_provider_azbatch.compute import UnknownVmSizeError, check_vm_size_fits

    pool_id = strategy.pool_id
    pool = hook.get_pool(pool_id) if pool_id else None
    if pool is None:
        raise SubmissionError(
            f"pool_id {pool_id!r} does not exist in Batch account '{hook.account_name}': create the pool first or "
            "give the id of an existing one"
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
        raise SubmissionError(f"pool {pool_id!r} does not fit this job: {exc}") from None


def _registry_json(registry: RegistryCredentials) -> dict[str, Any]:
    """The pool's containerRegistries entry (REST): lets nodes pre-fetch private images."""
    if registry.identity_reference:
        return {"registryServer": registry.server, "identityReference": {"resourceId": registry.identity_reference}}
    return {"registryServer": registry.server, "username": registry.username, "password": registry.password}

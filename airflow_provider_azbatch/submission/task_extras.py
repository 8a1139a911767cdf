"""What every task gets besides its command: container settings and Blob access (SAS URLs, log upload).

Resolved on the worker right before submission; secrets (registry password, SAS tokens) go to the Batch
service inside the task definitions only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.specs.blob_io import InputSpec, OutputSpec
from airflow_provider_azbatch.specs.containers import RegistryConfigError, RegistryCredentials
from airflow_provider_azbatch.specs.job_side_tasks import JobSideTask
from airflow_provider_azbatch.specs.options import BlobOptions, ContainerOptions
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import TaskExtras

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


def registry_credentials(hook: AzureBatchHook, containers: ContainerOptions) -> RegistryCredentials | None:
    if not containers.registry_conn_id:
        return None
    try:
        return RegistryCredentials.from_connection(hook.get_connection(containers.registry_conn_id))
    except RegistryConfigError as exc:
        raise AzureBatchValidationError("registry_conn_id", str(exc)) from None


def blob_plan(
    specs: Sequence[TaskSpec | JobSideTask],
    blob: BlobOptions,
    inputs: tuple[InputSpec, ...],
    outputs: tuple[OutputSpec, ...],
) -> tuple[list[str], list[str], LogLocation | None]:
    """(containers tasks read, containers tasks write, where logs go): checked, no I/O."""
    output_container = blob.output_container
    upload_logs = blob.upload_logs if blob.upload_logs is not None else output_container is not None
    if upload_logs and not output_container:
        raise AzureBatchValidationError("upload_logs", "needs output_container (where the logs go)")
    all_inputs = [*inputs, *(item for spec in specs for item in spec.inputs)]
    all_outputs = [*outputs, *(item for spec in specs for item in spec.outputs)]
    for index, output in enumerate(all_outputs):
        if not (output.container or output_container):
            raise AzureBatchValidationError(
                f"outputs[{index}].container",
                f"is missing ({output.pattern!r}): set its container or the operator's output_container",
            )
    reads = sorted({item.container for item in all_inputs if item.container})
    writes = {item.container or output_container for item in all_outputs} | (
        {output_container} if upload_logs else set()
    )
    location = LogLocation(output_container, blob.logs_prefix) if upload_logs and output_container else None
    return reads, sorted(name for name in writes if name), location


def blob_paths(
    specs: Sequence[TaskSpec | JobSideTask],
    blob: BlobOptions,
    inputs: tuple[InputSpec, ...],
    outputs: tuple[OutputSpec, ...],
    location: LogLocation | None,
) -> tuple[dict[str, list[str | None]], dict[str, list[str | None]]]:
    """(what the tasks read, where they write) by container: the paths of inputs and outputs (for lineage)."""
    reads: dict[str, list[str | None]] = {}
    writes: dict[str, list[str | None]] = {}
    for item in [*inputs, *(item for spec in specs for item in spec.inputs)]:
        if item.container and item.prefix not in reads.setdefault(item.container, []):
            reads[item.container].append(item.prefix)
    for output in [*outputs, *(output for spec in specs for output in spec.outputs)]:
        container = output.container or blob.output_container or ""
        if output.path not in writes.setdefault(container, []):
            writes[container].append(output.path)
    if location is not None:
        writes.setdefault(location.container, []).append(location.prefix)
    return reads, writes


def task_extras(
    hook: AzureBatchHook,
    specs: Sequence[TaskSpec | JobSideTask],
    containers: ContainerOptions,
    registry: RegistryCredentials | None,
    blob: BlobOptions,
    inputs: tuple[InputSpec, ...],
    outputs: tuple[OutputSpec, ...],
    sas_lifetime: timedelta,
) -> TaskExtras:
    reads, writes, location = blob_plan(specs, blob, inputs, outputs)
    read_urls: dict[str, str] = {}
    write_urls: dict[str, str] = {}
    if reads or writes:
        storage = hook.blob_storage("Blob inputs and outputs")
        read_paths, write_paths = blob_paths(specs, blob, inputs, outputs, location)
        read_urls = {name: storage.read_url(name, sas_lifetime, read_paths[name]) for name in reads}
        for name in writes:
            storage.ensure_container(name)
            if not blob.output_identity:
                write_urls[name] = storage.write_url(name, sas_lifetime, write_paths[name])
    return TaskExtras(
        image=containers.image,
        registry=registry,
        container_run_options=containers.all_run_options(),
        container_working_directory=containers.working_directory,
        inputs=inputs,
        outputs=outputs,
        output_container=blob.output_container,
        read_urls=read_urls,
        write_urls=write_urls,
        output_identity=blob.output_identity,
        log_container=location.container if location else None,
        log_path=location.path if location else None,
    )

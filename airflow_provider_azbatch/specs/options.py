"""Option groups of ``AzureBatchJobOperator``: containers, Blob inputs and outputs, fan-out.

Each can be passed as one object (``containers=ContainerOptions(image=...)``) or as the operator's flat
parameters of the same names (``image=...``); not both for the same option. Their string fields are
templated like the operator's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.container_runtime import (
    INFINIBAND_ENVIRONMENT,
    ContainerRuntimeError,
    infiniband_options,
    join_options,
    shm_option,
)

WORKING_DIRECTORIES = ("task", "image")


@dataclass
class ContainerOptions:
    """Run the job's tasks in a container image.

    :param image: the image (``myregistry.azurecr.io/train:1``); a task's own ``image`` wins.
    :param registry_conn_id: connection of a private registry: host = server, login + password, or
        extra ``identity_reference`` (a managed identity allowed to pull).
    :param run_options: extra ``docker create`` options.
    :param working_directory: ``task`` (the task's working directory, default) or ``image`` (the image's).
    :param shm_size: the containers' ``/dev/shm`` (``16g``; ``host``: the node's, ``--ipc=host``); default
        Docker's 64 MB, too small for PyTorch DataLoader workers.
    :param infiniband: give the containers the node's InfiniBand adapters for NCCL (``--device=/dev/infiniband``,
        ``--ulimit memlock=-1``, ``--cap-add=IPC_LOCK``, ``--network=host``, ``NCCL_IB_DISABLE=0``); the pool's VM
        size must have InfiniBand (the ND sizes).
    """

    image: str | None = None
    registry_conn_id: str | None = None
    run_options: str | None = None
    working_directory: str = "task"
    shm_size: str | None = None
    infiniband: bool = False

    template_fields: ClassVar[Sequence[str]] = ("image", "run_options", "shm_size")

    def check(self, flat_names: Mapping[str, str] | None = None) -> None:
        """``flat_names``: given as the operator's flat parameters (field -> parameter name where they differ)."""
        name = _namer("containers", flat_names)
        validation.image(self.image, name("image"))
        validation.text(self.registry_conn_id, name("registry_conn_id"))
        validation.text(self.run_options, name("run_options"))
        if self.working_directory not in WORKING_DIRECTORIES:
            raise validation.fail(
                name("working_directory"), f"must be 'task' or 'image', got {self.working_directory!r}"
            )
        try:
            shm_option(self.shm_size)
        except ContainerRuntimeError as exc:
            raise validation.fail(name("shm_size"), str(exc)) from None
        if not isinstance(self.infiniband, bool):
            raise validation.fail(name("infiniband"), f"must be True or False, got {self.infiniband!r}")

    def all_run_options(self) -> str | None:
        """What every container is created with: shared memory, InfiniBand, then ``run_options`` (which win)."""
        infiniband = infiniband_options() if self.infiniband else None
        return join_options(shm_option(self.shm_size), infiniband, self.run_options)

    def environment(self) -> dict[str, str]:
        """Variables the job's tasks get for these options (NCCL told to use InfiniBand)."""
        return dict(INFINIBAND_ENVIRONMENT) if self.infiniband else {}


@dataclass
class BlobOptions:
    """Blob inputs and outputs of every task, and where task logs are uploaded.

    :param inputs: downloads before each task runs: ``{"container", "prefix", "path"}`` or ``{"url", "path"}``.
    :param outputs: uploads after each task: ``{"pattern", "container", "path", "upload"}``.
    :param output_container: default container of outputs, and where task logs are uploaded.
    :param upload_logs: upload each task's stdout/stderr to ``output_container`` (default: when it is set).
    :param logs_prefix: blob path of uploaded logs: ``<logs_prefix>/<job id>/<task id>/stdout.txt``.
    :param output_identity: resource id of a managed identity the nodes upload with, instead of a SAS.
    """

    inputs: Sequence[Mapping[str, Any]] = ()
    outputs: Sequence[Mapping[str, Any]] = ()
    output_container: str | None = None
    upload_logs: bool | None = None
    logs_prefix: str = "azbatch-logs"
    output_identity: str | None = None

    template_fields: ClassVar[Sequence[str]] = ("inputs", "outputs", "output_container", "logs_prefix")

    def check(self, flat_names: Mapping[str, str] | None = None) -> None:
        name = _namer("blob", flat_names)
        validation.container_name(self.output_container, name("output_container"))
        validation.relative_path(self.logs_prefix, name("logs_prefix"), required=True)
        validation.text(self.output_identity, name("output_identity"))
        if self.upload_logs is not None and not isinstance(self.upload_logs, bool):
            raise validation.fail(name("upload_logs"), f"must be True or False, got {self.upload_logs!r}")


@dataclass
class FanOut:
    """One task per item of ``parameters``: ``command_template.format(**item)`` (``{value}`` for plain items).

    Task ids are ``<task_id_prefix>-<index>``.
    """

    command_template: str
    parameters: Sequence[Any] = field(default_factory=list)
    task_id_prefix: str = "task"

    template_fields: ClassVar[Sequence[str]] = ("command_template", "parameters")


def _namer(group: str, flat_names: Mapping[str, str] | None) -> Callable[[str], str]:
    """How errors name a field: ``containers.image`` in an option object, the operator's name when flat."""
    if flat_names is None:
        return lambda field_name: f"{group}.{field_name}"
    return lambda field_name: flat_names.get(field_name, field_name)


def merge(
    group: str, given: Any, flat: Mapping[str, Any], kind: type[Any], aliases: Mapping[str, str] | None = None
) -> Any:
    """The option object from ``given`` or from the flat parameters (None: not given); not both.

    ``aliases``: the operator's name of a flat parameter whose option field is named differently.
    """
    set_flat = {name: value for name, value in flat.items() if value is not None}
    if given is None:
        return kind(**set_flat)
    if not isinstance(given, kind):
        raise validation.fail(group, f"must be a {kind.__name__}, got {type(given).__name__} {given!r}")
    if set_flat:
        name = sorted(set_flat)[0]
        param = (aliases or {}).get(name, name)
        raise validation.fail(param, f"is also set in {group}: give {group}.{name} or {param}, not both")
    return given

"""The tasks of a job as an operator user writes them, checked before anything is submitted."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from azure.batch import models as batch_models

if TYPE_CHECKING:
    from airflow_provider_azbatch.utils.containers import RegistryCredentials
    from airflow_provider_azbatch.utils.task_io import InputSpec, OutputSpec

_TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
TASK_FIELDS = (
    "id",
    "command_line",
    "environment",
    "max_retries",
    "max_wall_clock",
    "depends_on",
    "required_slots",
    "display_name",
    "image",
    "num_nodes",
    "coordination_command",
    "inputs",
    "outputs",
)
# What a multi-node task's instances run before the primary's command when none is given.
DEFAULT_COORDINATION_COMMAND = "true"


class TaskSpecError(ValueError):
    """A task definition is wrong; the message names the field (``tasks[2].command_line``) and the fix."""


def _duration(value: Any, where: str) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TaskSpecError(f"{where} must be a timedelta or a number of seconds, got {value!r}")
    if seconds <= 0:
        raise TaskSpecError(f"{where} must be positive, got {value!r}")
    return timedelta(seconds=seconds)


def _environment(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TaskSpecError(f"{where} must be a mapping of names to strings, got {type(value).__name__}")
    out = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise TaskSpecError(f"{where} has an invalid variable name {name!r}")
        if not isinstance(item, (str, int, float)) or isinstance(item, bool):
            raise TaskSpecError(f"{where}[{name!r}] must be a string, got {type(item).__name__}")
        out[name] = str(item)
    return out


def _retries(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise TaskSpecError(f"{where} must be an integer >= -1 (-1 retries without limit), got {value!r}")
    return value


def _positive_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TaskSpecError(f"{where} must be an integer >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class TaskSpec:
    """One Batch task: ``id`` and ``command_line`` (run by ``/bin/sh -c`` on Linux nodes), optionally
    ``environment``, ``max_retries``, ``max_wall_clock`` (timedelta or seconds), ``depends_on`` (ids),
    ``required_slots``, ``display_name``, ``image`` (run in this container image), ``num_nodes`` with
    ``coordination_command`` (a multi-node task), ``inputs`` and ``outputs`` (Blob; see task_io)."""

    id: str
    command_line: str
    environment: Mapping[str, str] = field(default_factory=dict)
    max_retries: int | None = None
    max_wall_clock: timedelta | None = None
    depends_on: Sequence[str] = ()
    required_slots: int | None = None
    display_name: str | None = None
    image: str | None = None
    num_nodes: int = 1
    coordination_command: str | None = None
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()

    @classmethod
    def parse(cls, value: Any, where: str) -> TaskSpec:
        from airflow_provider_azbatch.utils.task_io import parse_inputs, parse_outputs

        if isinstance(value, TaskSpec):
            return value
        if not isinstance(value, Mapping):
            raise TaskSpecError(
                f"{where} must be a mapping with at least id and command_line, got {type(value).__name__}"
            )
        unknown = sorted(set(value) - set(TASK_FIELDS))
        if unknown:
            raise TaskSpecError(f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(TASK_FIELDS)}")
        task_id = value.get("id")
        if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
            raise TaskSpecError(
                f"{where}.id {task_id!r} is not a valid Batch task id: use at most 64 letters, digits, '-' or '_'"
            )
        command = value.get("command_line")
        if not isinstance(command, str) or not command.strip():
            raise TaskSpecError(f"{where}.command_line is missing: give the shell command the task runs")
        depends = value.get("depends_on") or ()
        if not isinstance(depends, (list, tuple)) or not all(isinstance(item, str) for item in depends):
            raise TaskSpecError(f"{where}.depends_on must be a list of task ids, got {depends!r}")
        slots = value.get("required_slots")
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 1):
            raise TaskSpecError(f"{where}.required_slots must be an integer >= 1, got {slots!r}")
        image = value.get("image")
        if image is not None and (not isinstance(image, str) or not image.strip()):
            raise TaskSpecError(f"{where}.image must be a container image name, got {image!r}")
        coordination = value.get("coordination_command")
        if coordination is not None and (not isinstance(coordination, str) or not coordination.strip()):
            raise TaskSpecError(f"{where}.coordination_command must be a shell command, got {coordination!r}")
        num_nodes = _positive_int(value.get("num_nodes"), f"{where}.num_nodes") or 1
        if coordination is not None and num_nodes == 1:
            raise TaskSpecError(f"{where}.coordination_command needs num_nodes > 1 (it runs on every node of the task)")
        return cls(
            id=task_id,
            command_line=command,
            environment=_environment(value.get("environment"), f"{where}.environment"),
            max_retries=_retries(value.get("max_retries"), f"{where}.max_retries"),
            max_wall_clock=_duration(value.get("max_wall_clock"), f"{where}.max_wall_clock"),
            depends_on=tuple(depends),
            required_slots=slots,
            display_name=value.get("display_name"),
            image=image,
            num_nodes=num_nodes,
            coordination_command=coordination,
            inputs=parse_inputs(value.get("inputs"), f"{where}.inputs"),
            outputs=parse_outputs(value.get("outputs"), f"{where}.outputs"),
        )

    def to_sdk(
        self, *, default_retries: int | None, default_wall_clock: timedelta | None, io: TaskExtras | None = None
    ) -> batch_models.BatchTaskCreateOptions:
        extras = io or TaskExtras()
        retries = self.max_retries if self.max_retries is not None else default_retries
        wall_clock = self.max_wall_clock or default_wall_clock
        constraints = None
        if retries is not None or wall_clock is not None:
            constraints = batch_models.BatchTaskConstraints(
                max_task_retry_count=retries, max_wall_clock_time=wall_clock
            )
        multi = None
        if self.num_nodes > 1:
            multi = batch_models.MultiInstanceSettings(
                number_of_instances=self.num_nodes,
                coordination_command_line=self.coordination_command or DEFAULT_COORDINATION_COMMAND,
            )
        return batch_models.BatchTaskCreateOptions(
            id=self.id,
            command_line=self.command_line,
            display_name=self.display_name,
            environment_settings=[batch_models.EnvironmentSetting(name=k, value=v) for k, v in self.environment.items()]
            or None,
            constraints=constraints,
            depends_on=batch_models.BatchTaskDependencies(task_ids=list(self.depends_on)) if self.depends_on else None,
            required_slots=self.required_slots,
            multi_instance_settings=multi,
            container_settings=extras.container_settings(self.image),
            resource_files=extras.resource_files(self.inputs) or None,
            output_files=extras.output_files(self.id, self.outputs) or None,
        )


@dataclass
class TaskExtras:
    """What the operator adds to every task: container settings, and Blob inputs/outputs resolved to
    container URLs (with SAS), including the upload of the task's logs."""

    image: str | None = None
    registry: RegistryCredentials | None = None
    container_run_options: str | None = None
    container_working_directory: str = "task"
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    output_container: str | None = None
    read_urls: Mapping[str, str] = field(default_factory=dict)
    write_urls: Mapping[str, str] = field(default_factory=dict)
    output_identity: str | None = None
    job_id: str = ""
    log_container: str | None = None
    log_path: Any = None  # callable (job id, task id) -> blob path, when logs are uploaded

    def container_settings(self, task_image: str | None) -> batch_models.BatchTaskContainerSettings | None:
        from airflow_provider_azbatch.utils.containers import container_settings

        image = task_image or self.image
        if image is None:
            return None
        return container_settings(image, self.registry, self.container_run_options, self.container_working_directory)

    def resource_files(self, task_inputs: Sequence[InputSpec]) -> list[batch_models.ResourceFile]:
        return [spec.to_sdk(self.read_urls.get(spec.container or "")) for spec in (*self.inputs, *task_inputs)]

    def output_files(self, task_id: str, task_outputs: Sequence[OutputSpec]) -> list[batch_models.OutputFile]:
        from airflow_provider_azbatch.utils.task_io import OutputSpec

        files = []
        for spec in (*self.outputs, *task_outputs):
            container = spec.container or self.output_container or ""
            files.append(spec.to_sdk(self.write_urls.get(container), self.output_identity))
        if self.log_container and self.log_path is not None:
            # Logs are uploaded whatever the outcome: that is when they are needed most.
            logs = OutputSpec(
                pattern="../std*.txt",
                container=self.log_container,
                path=self.log_path(self.job_id, task_id),
                upload="completion",
            )
            files.append(logs.to_sdk(self.write_urls.get(self.log_container), self.output_identity))
        return files


def _fan_out(template: str, parameters: Sequence[Any], prefix: str) -> list[TaskSpec]:
    if not isinstance(template, str) or not template.strip():
        raise TaskSpecError("command_template is empty: give the command, with {fields} taken from each parameter")
    if isinstance(parameters, (str, bytes, Mapping)) or not parameters:
        raise TaskSpecError("parameters must be a non-empty list (one task per item) to go with command_template")
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    width = len(str(len(parameters) - 1))
    tasks = []
    for index, item in enumerate(parameters):
        values = dict(item) if isinstance(item, Mapping) else {"value": item}
        missing = sorted(name for name in fields if name and not name.isdigit() and name not in values)
        if missing:
            raise TaskSpecError(
                f"parameters[{index}] has no {', '.join(missing)} for command_template "
                f"(it has: {', '.join(sorted(values)) or 'nothing'})"
            )
        try:
            command = template.format(*([] if isinstance(item, Mapping) else [item]), **values)
        except (IndexError, KeyError, ValueError) as exc:
            raise TaskSpecError(f"command_template cannot be filled from parameters[{index}]: {exc}") from None
        tasks.append(TaskSpec(id=f"{prefix}-{index:0{width}d}", command_line=command))
    return tasks


def parse_tasks(
    command: str | None,
    tasks: Sequence[Any] | None,
    *,
    default_task_id: str = "main",
    command_template: str | None = None,
    parameters: Sequence[Any] | None = None,
    task_id_prefix: str = "task",
    num_nodes: int = 1,
    coordination_command: str | None = None,
) -> list[TaskSpec]:
    """The operator's ``command``, ``tasks`` or ``command_template`` + ``parameters``, validated as a whole."""
    given = [
        name
        for name, value in (("command", command), ("tasks", tasks), ("command_template", command_template))
        if value
    ]
    if len(given) > 1:
        raise TaskSpecError(f"give one of command, tasks or command_template, not {' and '.join(given)}")
    if command_template is not None:
        return _check_all(_fan_out(command_template, parameters or [], task_id_prefix))
    if parameters:
        raise TaskSpecError("parameters only go with command_template")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise TaskSpecError("command is empty: give the shell command the task runs")
        spec = {"id": default_task_id, "command_line": command}
        if num_nodes != 1:
            spec["num_nodes"] = num_nodes
        if coordination_command is not None:
            spec["coordination_command"] = coordination_command
        return [TaskSpec.parse(spec, "command")]
    if num_nodes != 1 or coordination_command is not None:
        raise TaskSpecError(
            "num_nodes and coordination_command on the operator apply to command; in tasks, set them per task"
        )
    if not tasks:
        raise TaskSpecError(
            "nothing to run: give command (one task), tasks (a list of task definitions) or command_template "
            "with parameters (one task per parameter)"
        )
    if isinstance(tasks, (str, bytes, Mapping)):
        raise TaskSpecError(f"tasks must be a list of task definitions, got {type(tasks).__name__}")
    return _check_all([TaskSpec.parse(item, f"tasks[{index}]") for index, item in enumerate(tasks)])


def _check_all(specs: list[TaskSpec]) -> list[TaskSpec]:
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        key = spec.id.lower()  # the service compares task ids without case
        if key in seen:
            raise TaskSpecError(f"tasks[{index}].id {spec.id!r} repeats tasks[{seen[key]}].id: task ids must be unique")
        seen[key] = index
    for index, spec in enumerate(specs):
        for dependency in spec.depends_on:
            if dependency.lower() not in seen:
                raise TaskSpecError(f"tasks[{index}].depends_on names {dependency!r}, which is not a task of this job")
    return specs


@dataclass
class JobSubmission:
    """Everything needed to create one Batch job and its tasks.

    The job runs on ``pool_id`` (an existing or shared pool) or on an auto-pool made from
    ``auto_pool`` (REST pool fields) and deleted with the job.
    """

    job_id: str
    pool_id: str | None
    tasks: list[TaskSpec]
    environment: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    default_retries: int | None = None
    default_wall_clock: timedelta | None = None
    job_max_wall_clock: timedelta | None = None
    display_name: str | None = None
    terminate_when_done: bool = True
    max_parallel_tasks: int | None = None
    auto_pool: Mapping[str, Any] | None = None
    auto_pool_prefix: str = "airflow"
    extras: TaskExtras = field(default_factory=TaskExtras)

    def pool_info(self) -> batch_models.BatchPoolInfo:
        if self.auto_pool is not None:
            return batch_models.BatchPoolInfo(
                auto_pool_specification=batch_models.BatchAutoPoolSpecification(
                    auto_pool_id_prefix=self.auto_pool_prefix,
                    pool_lifetime_option=batch_models.BatchPoolLifetimeOption.JOB,
                    keep_alive=False,
                    pool=batch_models.BatchPoolSpecification(dict(self.auto_pool)),
                )
            )
        return batch_models.BatchPoolInfo(pool_id=self.pool_id)

    def job_options(self) -> batch_models.BatchJobCreateOptions:
        constraints = None
        if self.job_max_wall_clock is not None:
            constraints = batch_models.BatchJobConstraints(max_wall_clock_time=self.job_max_wall_clock)
        return batch_models.BatchJobCreateOptions(
            id=self.job_id,
            display_name=self.display_name,
            pool_info=self.pool_info(),
            uses_task_dependencies=any(task.depends_on for task in self.tasks) or None,
            common_environment_settings=[
                batch_models.EnvironmentSetting(name=k, value=v) for k, v in self.environment.items()
            ]
            or None,
            metadata=[batch_models.BatchMetadataItem(name=k, value=v) for k, v in self.metadata.items()] or None,
            constraints=constraints,
            max_parallel_tasks=self.max_parallel_tasks,
            all_tasks_complete_mode=batch_models.BatchAllTasksCompleteMode.NO_ACTION,
        )

    def task_options(self) -> list[batch_models.BatchTaskCreateOptions]:
        self.extras.job_id = self.job_id
        return [
            task.to_sdk(
                default_retries=self.default_retries, default_wall_clock=self.default_wall_clock, io=self.extras
            )
            for task in self.tasks
        ]

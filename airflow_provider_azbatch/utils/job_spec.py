"""The tasks of a job as an operator user writes them, checked before anything is submitted."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from azure.batch import models as batch_models

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
)


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


@dataclass(frozen=True)
class TaskSpec:
    """One Batch task: ``id`` and ``command_line`` (run by ``/bin/sh -c`` on Linux nodes), optionally
    ``environment``, ``max_retries``, ``max_wall_clock`` (timedelta or seconds), ``depends_on`` (ids),
    ``required_slots`` and ``display_name``."""

    id: str
    command_line: str
    environment: Mapping[str, str] = field(default_factory=dict)
    max_retries: int | None = None
    max_wall_clock: timedelta | None = None
    depends_on: Sequence[str] = ()
    required_slots: int | None = None
    display_name: str | None = None

    @classmethod
    def parse(cls, value: Any, where: str) -> TaskSpec:
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
        return cls(
            id=task_id,
            command_line=command,
            environment=_environment(value.get("environment"), f"{where}.environment"),
            max_retries=_retries(value.get("max_retries"), f"{where}.max_retries"),
            max_wall_clock=_duration(value.get("max_wall_clock"), f"{where}.max_wall_clock"),
            depends_on=tuple(depends),
            required_slots=slots,
            display_name=value.get("display_name"),
        )

    def to_sdk(
        self, *, default_retries: int | None, default_wall_clock: timedelta | None
    ) -> batch_models.BatchTaskCreateOptions:
        retries = self.max_retries if self.max_retries is not None else default_retries
        wall_clock = self.max_wall_clock or default_wall_clock
        constraints = None
        if retries is not None or wall_clock is not None:
            constraints = batch_models.BatchTaskConstraints(
                max_task_retry_count=retries, max_wall_clock_time=wall_clock
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
        )


def parse_tasks(command: str | None, tasks: Sequence[Any] | None, *, default_task_id: str = "main") -> list[TaskSpec]:
    """The operator's ``command`` or ``tasks``, validated as a whole (unique ids, known dependencies)."""
    if command is not None and tasks:
        raise TaskSpecError("give either command or tasks, not both")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise TaskSpecError("command is empty: give the shell command the task runs")
        return [TaskSpec(id=default_task_id, command_line=command)]
    if not tasks:
        raise TaskSpecError("nothing to run: give command (one task) or tasks (a list of task definitions)")
    if isinstance(tasks, (str, bytes, Mapping)):
        raise TaskSpecError(f"tasks must be a list of task definitions, got {type(tasks).__name__}")
    specs = [TaskSpec.parse(item, f"tasks[{index}]") for index, item in enumerate(tasks)]
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
    """Everything needed to create one Batch job and its tasks on an existing pool."""

    job_id: str
    pool_id: str
    tasks: list[TaskSpec]
    environment: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    default_retries: int | None = None
    default_wall_clock: timedelta | None = None
    job_max_wall_clock: timedelta | None = None
    display_name: str | None = None
    terminate_when_done: bool = True

    def job_options(self) -> batch_models.BatchJobCreateOptions:
        constraints = None
        if self.job_max_wall_clock is not None:
            constraints = batch_models.BatchJobConstraints(max_wall_clock_time=self.job_max_wall_clock)
        return batch_models.BatchJobCreateOptions(
            id=self.job_id,
            display_name=self.display_name,
            pool_info=batch_models.BatchPoolInfo(pool_id=self.pool_id),
            uses_task_dependencies=any(task.depends_on for task in self.tasks) or None,
            common_environment_settings=[
                batch_models.EnvironmentSetting(name=k, value=v) for k, v in self.environment.items()
            ]
            or None,
            metadata=[batch_models.BatchMetadataItem(name=k, value=v) for k, v in self.metadata.items()] or None,
            constraints=constraints,
            all_tasks_complete_mode=batch_models.BatchAllTasksCompleteMode.NO_ACTION,
        )

    def task_options(self) -> list[batch_models.BatchTaskCreateOptions]:
        return [
            task.to_sdk(default_retries=self.default_retries, default_wall_clock=self.default_wall_clock)
            for task in self.tasks
        ]

"""The tasks of a job as an operator user writes them, checked as a whole before anything is submitted."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.blob_io import InputSpec, OutputSpec, parse_inputs, parse_outputs
from airflow_provider_azbatch.specs.exit_conditions import ExitConditions, skip_codes
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.overrides import TASK_OVERRIDES
from airflow_provider_azbatch.specs.workspace import Workspace

# The exit codes that skip the Airflow task: a task's own key, and the operator's option of the same name.
SKIP_CODES = "skip_on_exit_code"
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
    "container_run_options",
    "num_nodes",
    "coordination_command",
    "inputs",
    "outputs",
    "workspace",
    "run_as",
    "overrides",
    "exit_conditions",
    SKIP_CODES,
    "result_file",
)
# What a multi-node task's instances run before the primary's command when none is given.
DEFAULT_COORDINATION_COMMAND = "true"


@dataclass(frozen=True)
class TaskSpec:
    """One Batch task: ``id`` and ``command_line`` (run by ``/bin/sh -c`` on Linux nodes), optionally
    ``environment``, ``max_retries``, ``max_wall_clock`` (timedelta or seconds), ``depends_on`` (ids),
    ``required_slots``, ``display_name``, ``image`` (run in this container image), ``container_run_options``
    (added after the job's container run options), ``num_nodes`` with
    ``coordination_command`` (a multi-node task), ``inputs`` and ``outputs`` (Blob; see blob_io),
    ``workspace`` (a local directory unpacked into ``workspace/``; see :mod:`airflow_provider_azbatch.workspace`),
    ``run_as`` (who it runs as; see :mod:`airflow_provider_azbatch.specs.identity`), ``overrides`` (Batch
    REST task fields merged over the generated task; see :mod:`airflow_provider_azbatch.specs.overrides`),
    ``exit_conditions`` (what its exit codes do to the job and its dependents; see
    :mod:`~airflow_provider_azbatch.specs.exit_conditions`), ``skip_on_exit_code`` (exit codes that skip the
    Airflow task when they are the job's only failures), ``result_file`` (a JSON file the task writes in its
    working directory, read back into the XCom result when the job succeeded)."""

    id: str
    command_line: str
    environment: Mapping[str, str] = field(default_factory=dict)
    max_retries: int | None = None
    max_wall_clock: timedelta | None = None
    depends_on: Sequence[str] = ()
    required_slots: int | None = None
    display_name: str | None = None
    image: str | None = None
    container_run_options: str | None = None
    num_nodes: int = 1
    coordination_command: str | None = None
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    workspace: Workspace | None = None
    run_as: RunAs | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    exit_conditions: ExitConditions | None = None
    skip_on_exit_code: frozenset[int] | None = None
    result_file: str | None = None

    def skip_codes_or(self, job_codes: frozenset[int] | None) -> frozenset[int] | None:
        """The exit codes that skip the Airflow task for this task: its own, or else the job's."""
        return self.skip_on_exit_code if self.skip_on_exit_code is not None else job_codes

    @classmethod
    def parse(cls, value: Any, where: str) -> TaskSpec:
        if isinstance(value, TaskSpec):
            value = {name: getattr(value, name) for name in TASK_FIELDS}
        value = validation.known_mapping(
            value, where, TASK_FIELDS, must_be="a mapping with at least id and command_line", quote_value=True
        )
        task_id = validation.batch_id(value.get("id"), f"{where}.id", "Batch task id")
        image = validation.image(value.get("image"), f"{where}.image")
        num_nodes = value.get("num_nodes")
        num_nodes = 1 if num_nodes is None else validation.integer(num_nodes, f"{where}.num_nodes", minimum=1)
        coordination = value.get("coordination_command")
        if coordination is not None:
            coordination = validation.command_line(coordination, f"{where}.coordination_command")
            if num_nodes == 1:
                raise validation.fail(
                    f"{where}.coordination_command", "needs num_nodes > 1 (it runs on every node of the task)"
                )
        slots = value.get("required_slots")
        return cls(
            id=task_id,
            command_line=validation.command_line(value.get("command_line"), f"{where}.command_line"),
            environment=validation.environment(value.get("environment"), f"{where}.environment"),
            max_retries=validation.retries(value.get("max_retries"), f"{where}.max_retries"),
            max_wall_clock=validation.duration(value.get("max_wall_clock"), f"{where}.max_wall_clock"),
            depends_on=tuple(
                validation.batch_id(item, f"{where}.depends_on[{index}]", "Batch task id")
                for index, item in enumerate(validation.string_list(value.get("depends_on"), f"{where}.depends_on"))
            ),
            required_slots=None
            if slots is None
            else validation.integer(slots, f"{where}.required_slots", minimum=1, maximum=validation.MAX_SLOTS),
            display_name=validation.text(
                value.get("display_name"), f"{where}.display_name", max_chars=validation.MAX_DISPLAY_NAME
            ),
            image=image,
            container_run_options=validation.text(value.get("container_run_options"), f"{where}.container_run_options"),
            num_nodes=num_nodes,
            coordination_command=coordination,
            inputs=parse_inputs(value.get("inputs"), f"{where}.inputs"),
            outputs=parse_outputs(value.get("outputs"), f"{where}.outputs"),
            workspace=Workspace.parse(value.get("workspace"), f"{where}.workspace"),
            run_as=RunAs.parse(value.get("run_as"), f"{where}.run_as"),
            overrides=TASK_OVERRIDES.check(value.get("overrides"), f"{where}.overrides"),
            exit_conditions=ExitConditions.parse(value.get("exit_conditions"), f"{where}.exit_conditions"),
            skip_on_exit_code=skip_codes(value.get(SKIP_CODES), f"{where}.{SKIP_CODES}"),
            result_file=validation.relative_path(value.get("result_file"), f"{where}.result_file"),
        )


def _fan_out(template: Any, parameters: Any, prefix: Any) -> list[TaskSpec]:
    command = validation.command_line(template, "command_template")
    validation.batch_id(prefix, "task_id_prefix", "task id prefix")
    if isinstance(parameters, (str, bytes, Mapping)) or not isinstance(parameters, Sequence) or not parameters:
        raise validation.fail("parameters", "must be a non-empty list (one task per item) to go with command_template")
    fields = {name for _, name, _, _ in string.Formatter().parse(command) if name}
    width = len(str(len(parameters) - 1))
    if len(prefix) + 1 + width > validation.MAX_ID_LENGTH:
        raise validation.fail("task_id_prefix", f"is too long for {len(parameters)} task ids of at most 64 characters")
    tasks = []
    for index, item in enumerate(parameters):
        values = dict(item) if isinstance(item, Mapping) else {"value": item}
        missing = sorted(name for name in fields if name and not name.isdigit() and name not in values)
        if missing:
            raise validation.fail(
                f"parameters[{index}]",
                f"has no {', '.join(missing)} for command_template (it has: {', '.join(sorted(values)) or 'nothing'})",
            )
        try:
            filled = command.format(*([] if isinstance(item, Mapping) else [item]), **values)
        except (IndexError, KeyError, ValueError, AttributeError) as exc:
            raise validation.fail("command_template", f"cannot be filled from parameters[{index}]: {exc}") from None
        tasks.append(TaskSpec.parse({"id": f"{prefix}-{index:0{width}d}", "command_line": filled}, f"tasks[{index}]"))
    return tasks


def parse_tasks(
    command: Any,
    tasks: Any,
    *,
    default_task_id: str = "main",
    command_template: Any = None,
    parameters: Any = None,
    task_id_prefix: Any = "task",
    num_nodes: Any = 1,
    coordination_command: Any = None,
) -> list[TaskSpec]:
    """The operator's ``command``, ``tasks`` or ``command_template`` + ``parameters``, validated as a whole."""
    given = [
        name
        for name, value in (("command", command), ("tasks", tasks), ("command_template", command_template))
        if value is not None
    ]
    if len(given) > 1:
        raise validation.fail(
            given[1], f"cannot be given with {given[0]}: give one of command, tasks or command_template"
        )
    if command_template is not None:
        return check_tasks(_fan_out(command_template, parameters, task_id_prefix))
    if parameters is not None:
        raise validation.fail("parameters", "only go with command_template")
    if command is not None:
        spec: dict[str, Any] = {"id": default_task_id, "command_line": command}
        if num_nodes != 1:
            spec["num_nodes"] = num_nodes
        if coordination_command is not None:
            spec["coordination_command"] = coordination_command
        try:
            return [TaskSpec.parse(spec, "command")]
        except AzureBatchValidationError as exc:
            # Name the operator's own parameter, not the task we built from it.
            field = {"command.command_line": "command", "command.num_nodes": "num_nodes"}.get(exc.field, exc.field)
            field = field.replace("command.coordination_command", "coordination_command")
            raise validation.fail(field, exc.problem) from None
    if num_nodes != 1 or coordination_command is not None:
        raise validation.fail(
            "num_nodes" if num_nodes != 1 else "coordination_command",
            "applies to command; in tasks, set num_nodes and coordination_command per task",
        )
    if tasks is None:
        raise validation.fail(
            "command",
            "is missing: give command (one task), tasks (a list of task definitions) or command_template with "
            "parameters (one task per parameter)",
        )
    if isinstance(tasks, (str, bytes, Mapping)) or not isinstance(tasks, Sequence):
        raise validation.fail("tasks", f"must be a list of task definitions, got {type(tasks).__name__} {tasks!r}")
    if not tasks:
        raise validation.fail("tasks", "is empty: give at least one task")
    return check_tasks([TaskSpec.parse(item, f"tasks[{index}]") for index, item in enumerate(tasks)])


def check_tasks(specs: list[TaskSpec]) -> list[TaskSpec]:
    """Ids unique (the service compares them without case) and dependencies forming no cycle."""
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        key = spec.id.lower()
        if key in seen:
            raise validation.fail(
                f"tasks[{index}].id", f"{spec.id!r} repeats tasks[{seen[key]}].id: task ids must be unique"
            )
        seen[key] = index
    validation.dependency_graph(
        {spec.id: spec.depends_on for spec in specs}, {spec.id: f"tasks[{index}]" for index, spec in enumerate(specs)}
    )
    return specs

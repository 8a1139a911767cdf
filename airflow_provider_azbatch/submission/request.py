"""What a user asked to run, as given (templates and all), and its check: every rule, without I/O.

The operator keeps its parameters as attributes (Airflow renders templated ones in place) and hands them
over as a :class:`JobRequest`. Before rendering (when the DAG is defined) only the groups of values that
hold no template are checked, so a mistake fails the DAG file instead of a run; after it (when the task
runs) all of them, before anything is submitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_provider_azbatch.compute import ComputeSpecError, named_vm_size, select_vm_size
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.pools.strategy import IDENTITY_REFUSED, BatchPool
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.blob_io import InputSpec, OutputSpec, parse_inputs, parse_outputs
from airflow_provider_azbatch.specs.container_runtime import ContainerRuntimeError, check_infiniband
from airflow_provider_azbatch.specs.exit_conditions import ExitConditions
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.job_side_tasks import PREPARATION, RELEASE, JobSideTask
from airflow_provider_azbatch.specs.options import BlobOptions, ContainerOptions, FanOut
from airflow_provider_azbatch.specs.overrides import JOB_OVERRIDES, TASK_OVERRIDES, find_keys
from airflow_provider_azbatch.specs.tasks import TaskSpec, parse_tasks
from airflow_provider_azbatch.specs.workspace import METADATA_KEY as WORKSPACE_METADATA_KEY
from airflow_provider_azbatch.specs.workspace import STAGED_METADATA_KEY, Workspace
from airflow_provider_azbatch.submission.job_ids import TASK_INSTANCE_KEYS
from airflow_provider_azbatch.workspace.staged_files import FileForTasks

# Batch job priorities run from -1000 (lowest) to 1000; the service's default is 0.
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
# Result files read back into XCom, at most (the XCom result lists this many tasks).
MAX_RESULT_FILES = 1000
# Job metadata the provider writes itself.
RESERVED_METADATA = (LogLocation.METADATA_KEY, WORKSPACE_METADATA_KEY, STAGED_METADATA_KEY, *TASK_INSTANCE_KEYS)


def holds_template(value: Any) -> bool:
    """Whether a (nested) value holds a Jinja template, which only the task's run can fill."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(holds_template(key) or holds_template(item) for key, item in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(holds_template(item) for item in value)
    fields = getattr(value, "template_fields", None)
    if fields is not None and not callable(getattr(value, "execute", None)):
        return any(holds_template(getattr(value, name, None)) for name in fields)
    return False


@dataclass
class CheckedRequest:
    """The request's values once checked (empty where a group still held a template)."""

    specs: list[TaskSpec] = field(default_factory=list)
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    display_name: str | None = None
    workspace: Workspace | None = None
    priority: int | None = None
    run_as: RunAs | None = None
    job_overrides: dict[str, Any] = field(default_factory=dict)
    task_overrides: dict[str, Any] = field(default_factory=dict)
    exit_conditions: ExitConditions | None = None
    job_preparation: JobSideTask | None = None
    job_release: JobSideTask | None = None


@dataclass
class JobRequest:
    """One Batch job as asked for: what runs, where, and the job's own settings."""

    pool: BatchPool
    command: Any = None
    tasks: Any = None
    fan_out: Any = None
    num_nodes: int = 1
    coordination_command: Any = None
    containers: ContainerOptions = field(default_factory=ContainerOptions)
    blob: BlobOptions = field(default_factory=BlobOptions)
    workspace: Any = None
    job_id: Any = None
    display_name: Any = None
    environment: Any = None
    metadata: Any = None
    max_task_retries: int | None = None
    max_wall_clock: timedelta | None = None
    job_max_wall_clock: timedelta | None = None
    max_parallel_tasks: int | None = None
    priority: Any = None
    run_as: Any = None
    job_overrides: Any = None
    task_overrides: Any = None
    fail_fast: bool = False
    exit_conditions: Any = None
    # Checked when the operator is made (the option is not templated).
    skip_codes: frozenset[int] | None = None
    job_preparation: Any = None
    job_release: Any = None
    result_file: Any = None
    # Files for the tasks' working directories (not a user's parameter: the TaskFlow decorator's call).
    files_for_tasks: Sequence[FileForTasks] = ()
    # How errors name option fields: ``containers.image`` when given as objects, ``image`` when flat
    # (option group -> {field: parameter name}, or None).
    option_names: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)

    def check(self, *, rendered: bool) -> CheckedRequest:
        """Every rule a value must keep. ``rendered=False``: only the groups that hold no template."""

        def ready(*values: Any) -> bool:
            return rendered or not any(holds_template(value) for value in values)

        checked = CheckedRequest()
        if ready(self.command, self.tasks, self.fan_out, self.coordination_command):
            checked.specs = self.specs()
        if ready(self.blob):
            checked.inputs = parse_inputs(self.blob.inputs, "inputs")
            checked.outputs = parse_outputs(self.blob.outputs, "outputs")
            self.blob.check(self.option_names.get("blob"))
        if ready(self.containers):
            self.containers.check(self.option_names.get("containers"))
            self._check_infiniband()
        if ready(self.workspace):
            checked.workspace = Workspace.parse(self.workspace, "workspace")
        if self.job_id is not None and ready(self.job_id):
            validation.batch_id(self.job_id, "job_id", "Batch job id")
        if ready(self.environment):
            checked.environment = validation.environment(self.environment, "environment")
        if ready(self.metadata):
            checked.metadata = validation.metadata(self.metadata, "metadata")
            for reserved in RESERVED_METADATA:
                if reserved in checked.metadata:
                    raise validation.fail(f"metadata[{reserved!r}]", "is set by the operator itself: use another name")
        if ready(self.display_name):
            checked.display_name = validation.text(
                self.display_name, "display_name", max_chars=validation.MAX_DISPLAY_NAME
            )
        if self.pool.kind == "existing" and ready(self.pool.pool_id):
            validation.batch_id(self.pool.pool_id, "pool_id", "Batch pool id")
        if not isinstance(self.fail_fast, bool):
            raise validation.fail("fail_fast", f"must be True or False, got {self.fail_fast!r}")
        checked.exit_conditions = ExitConditions.parse(self.exit_conditions, "exit_conditions")
        if ready(self.job_preparation):
            checked.job_preparation = JobSideTask.parse(self.job_preparation, PREPARATION, "job_preparation")
        if ready(self.job_release):
            checked.job_release = JobSideTask.parse(self.job_release, RELEASE, "job_release")
        if self.job_release is not None and self.job_preparation is None:
            raise validation.fail("job_release", "needs job_preparation: Batch runs a release task only with one")
        validation.relative_path(self.result_file, "result_file")
        if checked.specs and self.names_result_files():
            with_results = sum(1 for spec in checked.specs if spec.result_file or self.result_file)
            if with_results > MAX_RESULT_FILES:
                raise validation.fail(
                    "result_file",
                    f"is read back for {with_results} tasks; at most {MAX_RESULT_FILES} tasks' result files fit "
                    "in XCom: write results to Blob (outputs=) and reduce them in a task of their own",
                )
        if self.priority is not None and ready(self.priority):
            checked.priority = priority(self.priority)
        checked.run_as = RunAs.parse(self.run_as, "run_as")
        # Keys are checked even where a value still holds a template: a misspelt one fails the DAG file.
        checked.job_overrides = JOB_OVERRIDES.check(self.job_overrides, "job_overrides", templates=not rendered)
        checked.task_overrides = TASK_OVERRIDES.check(self.task_overrides, "task_overrides", templates=not rendered)
        self._check_identities(checked)
        self._check_overrides_of_job(checked)
        self._check_overrides_of_tasks(checked)
        return checked

    def _check_infiniband(self) -> None:
        """InfiniBand asked of a pool this provider creates: its VM size must have it (an existing pool's size is
        not known before it is read)."""
        pool = self.pool
        if not self.containers.infiniband or pool.kind == "existing" or pool.requirements is None:
            return
        try:
            requirements = pool.requirements
            vm = named_vm_size(pool.vm_size, requirements)[0] if pool.vm_size else select_vm_size(requirements)
            check_infiniband(vm)
        except ComputeSpecError:
            return  # the pool's own check names it
        except ContainerRuntimeError as exc:
            name = "infiniband" if self.option_names.get("containers") is not None else "containers.infiniband"
            raise validation.fail(name, f"{exc} (the BatchPool's vm_size=)") from None

    def _check_identities(self, checked: CheckedRequest) -> None:
        """What a pool the provider creates cannot do: managed identities, users it does not define."""
        if self.pool.kind == "existing":
            return
        if self.blob.output_identity and not holds_template(self.blob.output_identity):
            name = "output_identity" if self.option_names.get("blob") is not None else "blob.output_identity"
            raise validation.fail(name, IDENTITY_REFUSED)
        sources: list[tuple[str, Mapping[str, Any]]] = [("task_overrides", checked.task_overrides)]
        sources += [(f"tasks[{index}].overrides", spec.overrides) for index, spec in enumerate(checked.specs)]
        for where, overrides in sources:
            for path in find_keys(overrides, "identityReference"):
                raise validation.fail(f"{where}.{path}", IDENTITY_REFUSED)
        users = self.pool.user_names()
        identities = [("run_as", checked.run_as)]
        identities += [(f"tasks[{index}].run_as", spec.run_as) for index, spec in enumerate(checked.specs)]
        identities += [
            (f"job_{side.kind}.run_as", side.run_as)
            for side in (checked.job_preparation, checked.job_release)
            if side is not None
        ]
        for where, identity in identities:
            if identity is not None and identity.user is not None and identity.user.lower() not in users:
                raise validation.fail(
                    where,
                    f"names the user {identity.user!r}, which the pool does not define: add "
                    f"PoolUser({identity.user!r}) to the BatchPool's users",
                )

    def _check_overrides_of_job(self, checked: CheckedRequest) -> None:
        """A preparation or release task given through job_overrides adds to one given by its parameter."""
        for name, parameter in (("jobPreparationTask", "job_preparation"), ("jobReleaseTask", "job_release")):
            if name in checked.job_overrides and getattr(self, parameter) is None:
                raise validation.fail(
                    f"job_overrides.{name}",
                    f"adds to the task {parameter} gives (its command, environment, inputs...): give {parameter}",
                )

    def _check_overrides_of_tasks(self, checked: CheckedRequest) -> None:
        """A task's multi-instance settings come from num_nodes, and carry a workspace when it has one."""
        for index, spec in enumerate(checked.specs):
            for where, overrides in (
                ("task_overrides", checked.task_overrides),
                (f"tasks[{index}].overrides", spec.overrides),
            ):
                if "multiInstanceSettings" not in overrides:
                    continue
                if spec.num_nodes == 1:
                    raise validation.fail(
                        f"{where}.multiInstanceSettings",
                        f"applies to tasks on several nodes, and task {spec.id!r} runs on one: set num_nodes",
                    )
                if spec.workspace is not None or checked.workspace is not None:
                    raise validation.fail(
                        f"{where}.multiInstanceSettings",
                        f"is set by the provider for task {spec.id!r} (its workspace reaches every node through "
                        "commonResourceFiles): give the files as inputs, or drop the workspace",
                    )

    def names_result_files(self) -> bool:
        """Some task has a result file (without reading every task spec)."""
        if self.result_file is not None:
            return True
        tasks = self.tasks if isinstance(self.tasks, (list, tuple)) else ()
        return any(
            (task.get("result_file") if isinstance(task, Mapping) else getattr(task, "result_file", None))
            for task in tasks
        )

    def specs(self) -> list[TaskSpec]:
        fan_out = self.fan_out
        if fan_out is not None and not isinstance(fan_out, FanOut):
            raise validation.fail("fan_out", f"must be a FanOut, got {type(fan_out).__name__} {fan_out!r}")
        return parse_tasks(
            self.command,
            self.tasks,
            command_template=fan_out.command_template if fan_out else None,
            parameters=fan_out.parameters if fan_out else None,
            task_id_prefix=fan_out.task_id_prefix if fan_out else "task",
            num_nodes=self.num_nodes,
            coordination_command=self.coordination_command,
        )


def priority(value: Any) -> int:
    """A job priority: a whole number from -1000 to 1000 (a template renders one to a string)."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value.strip())
    return validation.integer(value, "priority", minimum=MIN_PRIORITY, maximum=MAX_PRIORITY)

"""One Batch job and its tasks as SDK request models: what the operator submits."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from azure.batch import models as batch_models

from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.specs import exit_conditions, validation
from airflow_provider_azbatch.specs.blob_io import InputSpec, OutputSpec
from airflow_provider_azbatch.specs.container_runtime import join_options
from airflow_provider_azbatch.specs.containers import RegistryCredentials, container_settings
from airflow_provider_azbatch.specs.exit_conditions import ExitConditions
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.job_side_tasks import JobSideTask
from airflow_provider_azbatch.specs.overrides import apply_overrides
from airflow_provider_azbatch.specs.shell import shell_command
from airflow_provider_azbatch.specs.tasks import DEFAULT_COORDINATION_COMMAND, TaskSpec
from airflow_provider_azbatch.specs.validation import MAX_COMMAND_BYTES
from airflow_provider_azbatch.workspace.delivery import StagedWorkspace
from airflow_provider_azbatch.workspace.staged_files import StagedFile


def _environment(variables: Mapping[str, str]) -> list[batch_models.EnvironmentSetting] | None:
    return [batch_models.EnvironmentSetting(name=k, value=v) for k, v in variables.items()] or None


def _command_line(task_id: str, field_name: str, script: str) -> str:
    """The script handed to a shell (the node runs command lines without one), within the node's limit."""
    command = shell_command(script)
    size = len(command.encode("utf-8"))
    if size > MAX_COMMAND_BYTES:
        raise validation.fail(
            f"task {task_id!r} {field_name}",
            f"is {size} bytes long as sent (with its shell and workspace set-up); a node runs at most "
            f"{MAX_COMMAND_BYTES} bytes as one command: stage long scripts as a file (workspace=) and run that",
        )
    return command


# What a side task that uploads logs is told (JobSideTask.log_upload).
LOGS_URL_ENV = "AZBATCH_LOGS_URL"
LOGS_PATH_ENV = "AZBATCH_LOGS_PATH"
# Where result files are uploaded, under a task's uploaded logs.
RESULT_FILES_DIR = "result"


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
    log_container: str | None = None
    # (job id, task id) -> blob path of the task's uploaded logs, when logs are uploaded.
    log_path: Callable[[str, str], str] | None = None
    # The staged workspace of each task that has one, by task id.
    workspaces: Mapping[str, StagedWorkspace] = field(default_factory=dict)
    # Files for the tasks' working directories, staged in Blob (a TaskFlow function's call).
    files: Sequence[StagedFile] = ()

    def container_settings(
        self, task_image: str | None, task_run_options: str | None = None
    ) -> batch_models.BatchTaskContainerSettings | None:
        image = task_image or self.image
        if image is None:
            return None
        run_options = join_options(self.container_run_options, task_run_options)
        return container_settings(image, self.registry, run_options, self.container_working_directory)

    def resource_files(
        self, task_inputs: Sequence[InputSpec], task_id: str | None = None
    ) -> list[batch_models.ResourceFile]:
        """The job's and the task's inputs, and the staged files that are the task's."""
        files = [spec.to_sdk(self.read_urls.get(spec.container or "")) for spec in (*self.inputs, *task_inputs)]
        if task_id is not None:
            staged = (item for item in self.files if item.for_task(task_id))
            files += [batch_models.ResourceFile(http_url=item.url, file_path=item.path) for item in staged]
        return files

    def output_files(
        self, job_id: str, task_id: str, task_outputs: Sequence[OutputSpec], result_file: str | None = None
    ) -> list[batch_models.OutputFile]:
        files = []
        for spec in (*self.outputs, *task_outputs):
            container = spec.container or self.output_container or ""
            files.append(spec.to_sdk(self.write_urls.get(container), self.output_identity))
        if self.log_container and self.log_path is not None:
            # Logs are uploaded whatever the outcome: that is when they are needed most.
            logs = OutputSpec(
                pattern="../std*.txt",
                container=self.log_container,
                path=self.log_path(job_id, task_id),
                upload="completion",
            )
            files.append(logs.to_sdk(self.write_urls.get(self.log_container), self.output_identity))
            if result_file is not None:
                # Beside the logs, so that it can be read once the node is gone (whatever the outcome: a
                # TaskFlow function's result file also says how it failed).
                result = OutputSpec(
                    pattern=result_file,
                    container=self.log_container,
                    path=f"{self.log_path(job_id, task_id)}/{RESULT_FILES_DIR}/{result_file}",
                    upload="completion",
                )
                files.append(result.to_sdk(self.write_urls.get(self.log_container), self.output_identity))
        return files


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
    # Where the tasks' logs are uploaded (read from there once a node is gone).
    log_location: LogLocation | None = None
    priority: int | None = None
    # Who every task runs as unless it says (None: the service's default, the pool's non-admin automatic user).
    run_as: RunAs | None = None
    # REST fields merged over the generated job, and over every task (before each task's own overrides).
    job_overrides: Mapping[str, Any] = field(default_factory=dict)
    task_overrides: Mapping[str, Any] = field(default_factory=dict)
    # The first failure terminates the job (see exit_conditions); tasks' own values win over the defaults.
    fail_fast: bool = False
    default_exit_conditions: ExitConditions | None = None
    default_skip_codes: frozenset[int] | None = None
    job_preparation: JobSideTask | None = None
    job_release: JobSideTask | None = None
    default_result_file: str | None = None
    # The job's pool may have Spot nodes: what its watch starts from (watching.preemption.spot_watch), or None.
    spot: dict[str, Any] | None = None

    def result_file_of(self, task: TaskSpec) -> str | None:
        return task.result_file if task.result_file is not None else self.default_result_file

    def exit_conditions_of(self, task: TaskSpec) -> ExitConditions | None:
        return task.exit_conditions if task.exit_conditions is not None else self.default_exit_conditions

    def skip_codes_of(self, task: TaskSpec) -> frozenset[int] | None:
        return task.skip_codes_or(self.default_skip_codes)

    @property
    def acts_on_job(self) -> bool:
        """A task's exit can end (or disable) the job: it is sent with ``onTaskFailure`` acting on exit options."""
        if self.fail_fast:
            return True
        return any((conditions := self.exit_conditions_of(task)) and conditions.acts_on_job for task in self.tasks)

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
        options = batch_models.BatchJobCreateOptions(
            id=self.job_id,
            priority=self.priority,
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
            # Set to terminate-job only once every task is added: a job told to end when all its tasks are
            # done could end between two batches.
            all_tasks_complete_mode=batch_models.BatchAllTasksCompleteMode.NO_ACTION,
            task_failure_mode=batch_models.BatchTaskFailureMode.PERFORM_EXIT_OPTIONS_JOB_ACTION
            if self.acts_on_job
            else None,
            job_preparation_task=self._preparation_task(),
            job_release_task=self._release_task(),
        )
        return apply_overrides(options, self.job_overrides)

    def _side_task_parts(self, side: JobSideTask) -> dict[str, Any]:
        """What preparation and release tasks share with tasks: command, environment, inputs, image, workspace."""
        extras = self.extras
        command = side.command
        resource_files = extras.resource_files(side.inputs)
        staged = extras.workspaces.get(side.id)
        if staged is not None:
            command = f"{staged.prelude()}\n{command}"
            resource_files.append(staged.resource_file(shared=False))
        run_as = side.run_as or self.run_as
        environment = {**side.environment, **(self._log_upload_environment() if side.log_upload else {})}
        return {
            "id": side.id,
            "user_identity": batch_models.UserIdentity(run_as.to_rest()) if run_as is not None else None,
            "command_line": _command_line(f"job_{side.kind}", "command", command),
            "container_settings": extras.container_settings(side.image),
            "resource_files": resource_files or None,
            "environment_settings": [batch_models.EnvironmentSetting(name=k, value=v) for k, v in environment.items()]
            or None,
        }

    def _log_upload_environment(self) -> dict[str, str]:
        """Where a side task uploads to: the log container's URL with its write SAS (the task's, as output files
        carry one) and the job's path in it. Nothing when logs are not uploaded, or by a managed identity."""
        extras = self.extras
        url = extras.write_urls.get(extras.log_container or "")
        if not url or extras.log_path is None:
            return {}
        return {LOGS_URL_ENV: url, LOGS_PATH_ENV: extras.log_path(self.job_id, "")}

    def _preparation_task(self) -> batch_models.BatchJobPreparationTask | None:
        side = self.job_preparation
        if side is None:
            return None
        constraints = None
        if side.max_wall_clock is not None or side.max_retries is not None:
            constraints = batch_models.BatchTaskConstraints(
                max_wall_clock_time=side.max_wall_clock, max_task_retry_count=side.max_retries
            )
        return batch_models.BatchJobPreparationTask(
            **self._side_task_parts(side), constraints=constraints, wait_for_success=side.wait_for_success
        )

    def _release_task(self) -> batch_models.BatchJobReleaseTask | None:
        side = self.job_release
        if side is None:
            return None
        return batch_models.BatchJobReleaseTask(**self._side_task_parts(side), max_wall_clock_time=side.max_wall_clock)

    def task_options(self) -> list[batch_models.BatchTaskCreateOptions]:
        acts_on_job = self.acts_on_job
        return [self._task_options(task, acts_on_job) for task in self.tasks]

    def _task_options(self, task: TaskSpec, acts_on_job: bool) -> batch_models.BatchTaskCreateOptions:
        extras = self.extras
        retries = task.max_retries if task.max_retries is not None else self.default_retries
        wall_clock = task.max_wall_clock or self.default_wall_clock
        constraints = None
        if retries is not None or wall_clock is not None:
            constraints = batch_models.BatchTaskConstraints(
                max_task_retry_count=retries, max_wall_clock_time=wall_clock
            )
        staged = extras.workspaces.get(task.id)
        resource_files = extras.resource_files(task.inputs, task.id)
        multi = None
        command = task.command_line
        if task.num_nodes > 1:
            coordination = task.coordination_command or DEFAULT_COORDINATION_COMMAND
            if staged is not None:
                coordination = f"{staged.coordination_prelude()}\n{coordination}"
                command = f"{staged.primary_prelude()}\n{command}"
            multi = batch_models.MultiInstanceSettings(
                number_of_instances=task.num_nodes,
                coordination_command_line=_command_line(task.id, "coordination_command", coordination),
                common_resource_files=[staged.resource_file(shared=True)] if staged is not None else None,
            )
        elif staged is not None:
            command = f"{staged.prelude()}\n{command}"
            resource_files.append(staged.resource_file(shared=False))
        run_as = task.run_as or self.run_as
        options = batch_models.BatchTaskCreateOptions(
            id=task.id,
            command_line=_command_line(task.id, "command_line", command),
            display_name=task.display_name,
            environment_settings=[batch_models.EnvironmentSetting(name=k, value=v) for k, v in task.environment.items()]
            or None,
            constraints=constraints,
            depends_on=batch_models.BatchTaskDependencies(task_ids=list(task.depends_on)) if task.depends_on else None,
            required_slots=task.required_slots,
            multi_instance_settings=multi,
            container_settings=extras.container_settings(task.image, task.container_run_options),
            resource_files=resource_files or None,
            output_files=extras.output_files(self.job_id, task.id, task.outputs, self.result_file_of(task)) or None,
            user_identity=batch_models.UserIdentity(run_as.to_rest()) if run_as is not None else None,
            exit_conditions=self._exit_conditions(task, acts_on_job),
        )
        return apply_overrides(options, self.task_overrides, task.overrides)

    def _exit_conditions(self, task: TaskSpec, acts_on_job: bool) -> batch_models.ExitConditions | None:
        rest = exit_conditions.to_rest(
            self.exit_conditions_of(task),
            fail_fast=self.fail_fast,
            acts_on_job=acts_on_job,
            skip=self.skip_codes_of(task),
        )
        return batch_models.ExitConditions(rest) if rest is not None else None

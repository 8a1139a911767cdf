"""``AzureBatchJobOperator``: submit a Batch job, stream its tasks' output, succeed iff all tasks did."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.batch import AzureBatchHook, describe_error
from airflow_provider_azbatch.utils.job_ids import attempt_job_id, check_job_id, default_job_id
from airflow_provider_azbatch.utils.job_results import collect_outcomes, failure_report
from airflow_provider_azbatch.utils.job_spec import JobSubmission, TaskSpec, TaskSpecError, parse_tasks
from airflow_provider_azbatch.utils.job_watch import JobWatcher, WatchState, enum_value, watch_step

if TYPE_CHECKING:
    from airflow.sdk import Context

ACTIVE_JOB_STATES = ("active", "disabling", "disabled", "enabling")


class AzureBatchJobOperator(BaseOperator):
    """Run one Azure Batch job on an existing pool and wait for it, showing its tasks' output.

    :param pool_id: the pool the job runs on (must exist).
    :param command: one task: the shell command it runs (``/bin/sh -c`` on Linux nodes).
    :param tasks: several tasks, each a mapping with ``id`` and ``command_line`` and optionally
        ``environment``, ``max_retries``, ``max_wall_clock``, ``depends_on``, ``required_slots``,
        ``display_name`` (or :class:`~airflow_provider_azbatch.utils.job_spec.TaskSpec` objects).
    :param job_id: the Batch job id; default: derived from DAG, task, run and map index, so a retry
        of the same task instance finds the job an earlier try submitted.
    :param environment: environment variables for every task of the job.
    :param metadata: name/value metadata stored on the job.
    :param max_task_retries: how often the service retries a failed task (-1: without limit); per-task
        ``max_retries`` wins.
    :param max_wall_clock: longest a task may run (timedelta or seconds); per-task value wins.
    :param job_max_wall_clock: longest the whole job may run before the service terminates it.
    :param azbatch_conn_id: the ``azbatch`` connection (default ``[azbatch] default_conn_id``).
    :param poll_interval: seconds between polls (default ``[azbatch] poll_interval``).
    :param stream_output: show task stdout/stderr in the Airflow log (default ``[azbatch] stream_task_output``).
    :param max_streamed_tasks: show live output of at most this many tasks, the first ones submitted
        (default ``[azbatch] max_streamed_tasks``); stderr of failed tasks is always shown at the end.
    :param failure_tail_lines: stderr lines quoted in the error for a failed task.
    :param force_new_job: submit a new job even if this task instance already has one.
    """

    template_fields: Sequence[str] = (
        "job_id",
        "pool_id",
        "command",
        "tasks",
        "environment",
        "metadata",
        "display_name",
    )
    template_fields_renderers = {"tasks": "json", "environment": "json", "metadata": "json", "command": "bash"}
    ui_color = "#cfe8fc"

    def __init__(
        self,
        *,
        pool_id: str,
        command: str | None = None,
        tasks: Sequence[Mapping[str, Any] | TaskSpec] | None = None,
        job_id: str | None = None,
        environment: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        max_task_retries: int | None = None,
        max_wall_clock: timedelta | float | None = None,
        job_max_wall_clock: timedelta | float | None = None,
        display_name: str | None = None,
        azbatch_conn_id: str | None = None,
        poll_interval: float | None = None,
        stream_output: bool | None = None,
        max_streamed_tasks: int | None = None,
        failure_tail_lines: int | None = None,
        force_new_job: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pool_id = pool_id
        self.command = command
        self.tasks = tasks
        self.job_id = job_id
        self.environment = dict(environment or {})
        self.metadata = dict(metadata or {})
        self.max_task_retries = max_task_retries
        self.max_wall_clock = max_wall_clock
        self.job_max_wall_clock = job_max_wall_clock
        self.display_name = display_name
        self.azbatch_conn_id = azbatch_conn_id or config.get_str("default_conn_id")
        self.poll_interval = poll_interval if poll_interval is not None else config.get_float("poll_interval")
        self.stream_output = stream_output if stream_output is not None else config.get_bool("stream_task_output")
        self.max_streamed_tasks = (
            max_streamed_tasks if max_streamed_tasks is not None else config.get_int("max_streamed_tasks")
        )
        self.failure_tail_lines = (
            failure_tail_lines if failure_tail_lines is not None else config.get_int("failure_tail_lines")
        )
        self.force_new_job = force_new_job
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, got {self.poll_interval!r}")
        if self.max_streamed_tasks < 0:
            raise ValueError(f"max_streamed_tasks must be >= 0, got {self.max_streamed_tasks!r}")
        self._submitted_job_id: str | None = None

    @cached_property
    def hook(self) -> AzureBatchHook:
        return AzureBatchHook(self.azbatch_conn_id)

    # -- execution ----------------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        submission = self._submission(context)
        hook = self.hook
        self._check_pool(hook, submission.pool_id)
        job_id, finished = self._submit_or_reattach(hook, submission)
        watcher = self._watcher(job_id, submission.tasks)
        if not finished:
            self._wait(hook, watcher)
        return self._finish(hook, watcher)

    def _submission(self, context: Context) -> JobSubmission:
        try:
            specs = parse_tasks(self.command, self.tasks)
        except TaskSpecError as exc:
            raise AirflowException(f"{self.task_id}: {exc}") from None
        job_id = self.job_id or default_job_id(
            context["dag"].dag_id, self.task_id, context["run_id"], getattr(context["ti"], "map_index", -1)
        )
        try:
            check_job_id(job_id)
        except ValueError as exc:
            raise AirflowException(str(exc)) from None
        if not isinstance(self.pool_id, str) or not self.pool_id:
            raise AirflowException("pool_id is missing: name the Batch pool the job runs on")
        return JobSubmission(
            job_id=job_id,
            pool_id=self.pool_id,
            tasks=specs,
            environment=self.environment,
            metadata=self.metadata,
            default_retries=self.max_task_retries,
            default_wall_clock=_seconds(self.max_wall_clock, "max_wall_clock"),
            job_max_wall_clock=_seconds(self.job_max_wall_clock, "job_max_wall_clock"),
            display_name=self.display_name,
        )

    def _check_pool(self, hook: AzureBatchHook, pool_id: str) -> None:
        if not hook.pool_exists(pool_id):
            raise AirflowException(
                f"pool_id {pool_id!r} does not exist in Batch account '{hook.account_name}': create the pool first "
                "or give the id of an existing one"
            )

    def _submit_or_reattach(self, hook: AzureBatchHook, submission: JobSubmission) -> tuple[str, bool]:
        """(job id to watch, whether it already finished). Never creates a second job for a try."""
        base = submission.job_id
        attempt = 1
        while True:
            job_id = base if attempt == 1 else attempt_job_id(base, attempt)
            job = hook.get_job(job_id, select=["id", "state", "executionInfo"])
            if job is None:
                submission.job_id = job_id
                self.log.info(
                    "Submitting Batch job %s with %d task(s) to pool %s",
                    job_id,
                    len(submission.tasks),
                    submission.pool_id,
                )
                if hook.submit_job(submission):
                    self._submitted_job_id = job_id
                    return job_id, False
                continue  # created by someone else in between: look again
            state = enum_value(job.state)
            if state in ACTIVE_JOB_STATES and not self.force_new_job:
                self.log.info("Reattaching to Batch job %s (state %s) submitted by an earlier try", job_id, state)
                submission.job_id = job_id
                hook.submit_job(submission)  # adds any task a crashed try did not add yet
                self._submitted_job_id = job_id
                return job_id, False
            if state == "completed" and not self.force_new_job and self._all_succeeded(hook, job_id):
                self.log.info(
                    "Batch job %s already finished successfully in an earlier try; not running it again", job_id
                )
                return job_id, True
            attempt += 1

    def _all_succeeded(self, hook: AzureBatchHook, job_id: str) -> bool:
        counts = hook.get_task_counts(job_id)
        return counts.failed == 0 and counts.active == 0 and counts.running == 0 and counts.completed > 0

    def _watcher(self, job_id: str, specs: list[TaskSpec]) -> JobWatcher:
        state = WatchState(
            job_id=job_id,
            expected_tasks=len(specs),
            streamed=[spec.id for spec in specs[: self.max_streamed_tasks]] if self.stream_output else [],
        )
        return JobWatcher(state, stream_output=self.stream_output)

    def _wait(self, hook: AzureBatchHook, watcher: JobWatcher) -> None:
        max_bytes = config.get_int("max_read_bytes")
        while not watch_step(hook.client, watcher, self._emit, max_bytes=max_bytes):
            time.sleep(self.poll_interval)

    def _emit(self, line: str) -> None:
        self.log.info("%s", line)

    def _finish(self, hook: AzureBatchHook, watcher: JobWatcher) -> dict[str, Any]:
        job_id = watcher.state.job_id
        listed, unsuccessful, total = collect_outcomes(hook.client, job_id)
        job = hook.get_job(job_id, select=["id", "state", "executionInfo", "poolInfo"])
        reason = getattr(job.execution_info, "termination_reason", None) if job is not None else None
        counts = hook.get_task_counts(job_id)
        self.log.info("Batch job %s: %d of %d tasks succeeded", job_id, counts.succeeded, total)
        if unsuccessful:
            raise AirflowException(
                failure_report(
                    hook.client,
                    job_id,
                    unsuccessful,
                    total,
                    tail_lines=self.failure_tail_lines,
                    terminate_reason=reason,
                )
            )
        return {
            "job_id": job_id,
            "pool_id": self.pool_id,
            "job_state": enum_value(job.state) if job is not None else None,
            "terminate_reason": reason,
            "task_counts": counts.to_json(),
            "tasks": {outcome.id: outcome.to_json() for outcome in listed},
            "tasks_truncated": total > len(listed),
        }

    def on_kill(self) -> None:
        job_id = self._submitted_job_id
        if job_id is None:
            return
        self.log.info("Terminating Batch job %s (the Airflow task was killed)", job_id)
        try:
            self.hook.terminate_job(job_id, reason="AirflowTaskKilled")
        except Exception as exc:  # on_kill must not raise; say what happened instead
            self.log.error("Could not terminate Batch job %s: %s", job_id, describe_error(exc))


def _seconds(value: timedelta | float | None, name: str) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        result = timedelta(seconds=value)
    else:
        raise AirflowException(f"{name} must be a timedelta or a number of seconds, got {value!r}")
    if result.total_seconds() <= 0:
        raise AirflowException(f"{name} must be positive, got {value!r}")
    return result

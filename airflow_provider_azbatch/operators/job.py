"""``AzureBatchJobOperator``: submit a Batch job, stream its tasks' output, succeed iff all tasks did."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.batch import AzureBatchHook, describe_error
from airflow_provider_azbatch.links.job import LINK_XCOM_KEY, AzureBatchJobLink
from airflow_provider_azbatch.triggers.job import DEFAULT_MAX_OUTAGE_SECONDS, AzureBatchJobTrigger
from airflow_provider_azbatch.utils.job_ids import check_job_id, default_job_id
from airflow_provider_azbatch.utils.job_results import collect_outcomes, failure_report
from airflow_provider_azbatch.utils.job_spec import JobSubmission, TaskSpec, TaskSpecError, parse_tasks
from airflow_provider_azbatch.utils.job_watch import JobWatcher, WatchState, enum_value, watch_step
from airflow_provider_azbatch.utils.pool_health import PoolProblem
from airflow_provider_azbatch.utils.pool_strategy import BatchPool
from airflow_provider_azbatch.utils.reattach import remember_job, remembered_job, submit_or_reattach
from airflow_provider_azbatch.utils.submission import (
    BlobOptions,
    ContainerOptions,
    SubmissionError,
    prepare_pool,
    task_extras,
)
from airflow_provider_azbatch.utils.task_io import parse_inputs, parse_outputs

if TYPE_CHECKING:
    from airflow.sdk import Context

# Job metadata naming where its tasks' logs are uploaded: "<container>/<prefix>".
LOGS_METADATA_KEY = "azbatch-logs"
ON_FINISH_ACTIONS = ("keep_job", "delete_job", "delete_succeeded_job")
# The trigger's own timeout fires this long before Airflow's deferral timeout would.
TIMEOUT_PADDING = timedelta(seconds=60)
# How long the wait loop lets on_kill's terminate request finish before it sends its own.
KILL_THREAD_WAIT_SECONDS = 30


def _default_deferrable() -> bool:
    from airflow.sdk import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


class AzureBatchJobOperator(BaseOperator):
    """Run one Azure Batch job on an existing pool and wait for it, showing its tasks' output.

    :param pool_id: the existing pool the job runs on (shorthand for ``batch_pool=BatchPool.existing(pool_id)``).
    :param pool: where the job runs: :class:`~airflow_provider_azbatch.utils.pool_strategy.BatchPool`
        ``existing`` (checked: exists, VM size fits ``requirements``), ``shared`` (a named pool created from
        resource requirements if missing) or ``auto`` (a pool made for the job and deleted with it).
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
    :param deferrable: wait in the triggerer instead of holding a worker slot (default
        ``[operators] default_deferrable``).
    :param stream_output: show task stdout/stderr in the Airflow log (default ``[azbatch] stream_task_output``).
    :param max_streamed_tasks: show live output of at most this many tasks, the first ones submitted
        (default ``[azbatch] max_streamed_tasks``); stderr of failed tasks is always shown at the end.
    :param failure_tail_lines: stderr lines quoted in the error for a failed task.
    :param on_finish_action: ``keep_job`` (default), ``delete_job`` or ``delete_succeeded_job``.
    :param force_new_job: submit a new job even if this task instance already has one.
    :param max_outage: deferrable mode: seconds of Batch service errors the trigger waits out.
    :param command_template: fan-out: one task per item of ``parameters``, ``command_template.format(**item)``
        (or ``{value}`` for plain items); task ids ``<task_id_prefix>-<index>``.
    :param num_nodes: with ``command``: run it as a multi-node task on this many nodes (per task: ``num_nodes``).
    :param coordination_command: with ``num_nodes``: what every node runs first (per task: ``coordination_command``).
    :param max_parallel_tasks: most tasks of the job running at once.
    :param image: run tasks in this container image (per task: ``image``); needs a container pool.
    :param registry_conn_id: connection of a private container registry (host, login, password, or extra
        ``identity_reference``).
    :param container_run_options: extra ``docker create`` options.
    :param container_working_directory: ``task`` (the task's working directory, default) or ``image``.
    :param inputs: Blob inputs for every task (see :mod:`airflow_provider_azbatch.utils.task_io`).
    :param outputs: Blob outputs for every task.
    :param output_container: default container of outputs, and where task logs are uploaded.
    :param upload_logs: upload each task's stdout/stderr to ``output_container`` (default: when it is set).
    :param logs_prefix: blob path of uploaded logs: ``<logs_prefix>/<job id>/<task id>/stdout.txt``.
    :param output_identity: resource id of a managed identity the nodes upload with, instead of a SAS.
    """

    template_fields: Sequence[str] = (
        "job_id",
        "pool_id",
        "command",
        "tasks",
        "environment",
        "metadata",
        "display_name",
        "command_template",
        "parameters",
        "image",
        "inputs",
        "outputs",
        "output_container",
        "logs_prefix",
    )
    template_fields_renderers = {
        "tasks": "json",
        "environment": "json",
        "metadata": "json",
        "command": "bash",
        "parameters": "json",
        "inputs": "json",
        "outputs": "json",
    }
    ui_color = "#cfe8fc"
    operator_extra_links = (AzureBatchJobLink(),)

    def __init__(
        self,
        *,
        pool_id: str | None = None,
        batch_pool: BatchPool | None = None,
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
        deferrable: bool | None = None,
        stream_output: bool | None = None,
        max_streamed_tasks: int | None = None,
        failure_tail_lines: int | None = None,
        on_finish_action: str = "keep_job",
        force_new_job: bool = False,
        max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS,
        command_template: str | None = None,
        parameters: Sequence[Any] | None = None,
        task_id_prefix: str = "task",
        num_nodes: int = 1,
        coordination_command: str | None = None,
        max_parallel_tasks: int | None = None,
        image: str | None = None,
        registry_conn_id: str | None = None,
        container_run_options: str | None = None,
        container_working_directory: str = "task",
        inputs: Sequence[Mapping[str, Any]] | None = None,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        output_container: str | None = None,
        upload_logs: bool | None = None,
        logs_prefix: str = "azbatch-logs",
        output_identity: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # (``pool`` is taken: BaseOperator's Airflow pool, the worker slots the task may use.)
        if (pool_id is None) == (batch_pool is None):
            raise ValueError("give either pool_id (an existing pool) or batch_pool (BatchPool.existing/shared/auto)")
        if batch_pool is not None and not isinstance(batch_pool, BatchPool):
            raise ValueError(
                f"batch_pool must be a BatchPool (existing, shared or auto), got {type(batch_pool).__name__}"
            )
        self.pool_id = pool_id if pool_id is not None else batch_pool.pool_id  # type: ignore[union-attr]
        self.batch_pool = batch_pool
        self.command_template = command_template
        self.parameters = parameters
        self.task_id_prefix = task_id_prefix
        self.num_nodes = num_nodes
        self.coordination_command = coordination_command
        self.max_parallel_tasks = max_parallel_tasks
        self.image = image
        self.registry_conn_id = registry_conn_id
        self.container_run_options = container_run_options
        self.container_working_directory = container_working_directory
        self.inputs = inputs
        self.outputs = outputs
        self.output_container = output_container
        self.upload_logs = upload_logs
        self.logs_prefix = logs_prefix
        self.output_identity = output_identity
        if max_parallel_tasks is not None and (isinstance(max_parallel_tasks, bool) or max_parallel_tasks < 1):
            raise ValueError(f"max_parallel_tasks must be an integer >= 1, got {max_parallel_tasks!r}")
        if container_working_directory not in ("task", "image"):
            raise ValueError(
                f"container_working_directory must be 'task' or 'image', got {container_working_directory!r}"
            )
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
        self.deferrable = deferrable if deferrable is not None else _default_deferrable()
        self.stream_output = stream_output if stream_output is not None else config.get_bool("stream_task_output")
        self.max_streamed_tasks = (
            max_streamed_tasks if max_streamed_tasks is not None else config.get_int("max_streamed_tasks")
        )
        self.failure_tail_lines = (
            failure_tail_lines if failure_tail_lines is not None else config.get_int("failure_tail_lines")
        )
        self.on_finish_action = on_finish_action
        self.force_new_job = force_new_job
        self.max_outage = max_outage
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, got {self.poll_interval!r}")
        if self.max_streamed_tasks < 0:
            raise ValueError(f"max_streamed_tasks must be >= 0, got {self.max_streamed_tasks!r}")
        if on_finish_action not in ON_FINISH_ACTIONS:
            raise ValueError(
                f"on_finish_action must be one of {', '.join(ON_FINISH_ACTIONS)}, got {on_finish_action!r}"
            )
        self._submitted_job_id: str | None = None
        self._killed = False
        self._kill_thread: threading.Thread | None = None

    @cached_property
    def hook(self) -> AzureBatchHook:
        return AzureBatchHook(self.azbatch_conn_id)

    # -- execution ----------------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        hook = self.hook
        submission = self._submission(context, hook)
        attachment = submit_or_reattach(
            hook,
            submission,
            remembered=remembered_job(context),
            remember=lambda job_id: remember_job(context, job_id),
            force_new=self.force_new_job,
            log=self.log,
            claim=self._claim,
        )
        job_id, finished = attachment.job_id, attachment.finished
        if self._killed:
            # Killed while submitting: the job may have been created after on_kill looked for it.
            self._end_killed_job(job_id)
            raise AirflowException(f"The task was killed while submitting Batch job {job_id}; the job was terminated")
        self._publish_job(context, job_id)
        watcher = self._watcher(job_id, submission)
        if finished:
            return self._finish(hook, watcher)
        if self.deferrable:
            self._defer(context, watcher)
        try:
            self._wait(hook, watcher)
        except PoolProblem as problem:
            self._terminate(job_id, "PoolProblem")
            raise AirflowException(f"Batch job {job_id} cannot run: {problem}; the job was terminated") from None
        except BaseException as exc:
            if type(exc).__name__ == "AirflowTaskTimeout":
                self._terminate_for_timeout(job_id)
                raise type(exc)(
                    f"Batch job {job_id} did not finish within execution_timeout ({self.execution_timeout}); "
                    "the Batch job was terminated"
                ) from None
            raise
        return self._finish(hook, watcher)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: flush what it did not print, then report like the sync path."""
        if not event or "watch_state" not in event:
            raise AirflowException(f"The Batch trigger sent no usable event ({event!r})")
        hook = self.hook
        watcher = JobWatcher(WatchState.from_json(event["watch_state"]), stream_output=self.stream_output)
        job_id = watcher.state.job_id
        self._submitted_job_id = job_id
        status = event.get("status")
        if status == "timeout":
            self._terminate_for_timeout(job_id)
            self._flush(hook, watcher)
            raise AirflowException(
                f"Batch job {job_id} did not finish within execution_timeout ({self.execution_timeout}); "
                "the Batch job was terminated"
            )
        if status == "error":
            if event.get("pool_problem"):
                self._terminate(job_id, "PoolProblem")
                raise AirflowException(f"Batch job {job_id} cannot run: {event['message']}; the job was terminated")
            raise AirflowException(event.get("message") or f"Waiting for Batch job {job_id} failed")
        self._flush(hook, watcher)
        return self._finish(hook, watcher)

    # -- submission ---------------------------------------------------------------------------------------
    def _submission(self, context: Context, hook: AzureBatchHook) -> JobSubmission:
        """Everything checked and prepared (pool, storage access, registry) before anything is submitted."""
        try:
            specs = parse_tasks(
                self.command,
                self.tasks,
                command_template=self.command_template,
                parameters=self.parameters,
                task_id_prefix=self.task_id_prefix,
                num_nodes=self.num_nodes,
                coordination_command=self.coordination_command,
            )
            inputs = parse_inputs(self.inputs, "inputs")
            outputs = parse_outputs(self.outputs, "outputs")
        except TaskSpecError as exc:
            raise AirflowException(f"{self.task_id}: {exc}") from None
        job_id = self.job_id or default_job_id(
            context["dag"].dag_id, self.task_id, context["run_id"], getattr(context["ti"], "map_index", -1)
        )
        try:
            check_job_id(job_id)
        except ValueError as exc:
            raise AirflowException(str(exc)) from None
        try:
            extras = task_extras(
                hook,
                self.task_id,
                specs,
                ContainerOptions(
                    self.image, self.registry_conn_id, self.container_run_options, self.container_working_directory
                ),
                BlobOptions(
                    inputs=inputs,
                    outputs=outputs,
                    output_container=self.output_container,
                    upload_logs=self.upload_logs,
                    logs_prefix=self.logs_prefix,
                    output_identity=self.output_identity,
                    sas_lifetime=timedelta(hours=config.get_float("sas_hours")),
                ),
            )
            strategy = self.batch_pool or BatchPool.existing(self._pool_id())
            pool_id, auto_pool = prepare_pool(hook, strategy, specs, extras, self.log)
        except SubmissionError as exc:
            message = str(exc)
            raise AirflowException(
                message if message.startswith(f"{self.task_id}:") else f"{self.task_id}: {message}"
            ) from None
        metadata = dict(self.metadata)
        if extras.log_container:
            # Kept with the job, so that anyone watching it later (the sensor) finds its uploaded logs.
            metadata[LOGS_METADATA_KEY] = f"{extras.log_container}/{self.logs_prefix}"
        return JobSubmission(
            job_id=job_id,
            pool_id=pool_id,
            tasks=specs,
            environment=self.environment,
            metadata=metadata,
            default_retries=self.max_task_retries,
            default_wall_clock=_seconds(self.max_wall_clock, "max_wall_clock"),
            job_max_wall_clock=_seconds(self.job_max_wall_clock, "job_max_wall_clock"),
            display_name=self.display_name,
            max_parallel_tasks=self.max_parallel_tasks,
            auto_pool=auto_pool,
            auto_pool_prefix=strategy.auto_pool_prefix,
            extras=extras,
        )

    def _pool_id(self) -> str:
        if not isinstance(self.pool_id, str) or not self.pool_id:
            raise AirflowException("pool_id is missing: name the Batch pool the job runs on")
        return self.pool_id

    def _publish_job(self, context: Context, job_id: str) -> None:
        settings = self.hook.settings
        context["ti"].xcom_push(
            key=LINK_XCOM_KEY,
            value={
                "job_id": job_id,
                "account_url": settings.account_url,
                "account_name": self.hook.account_name,
                "subscription_id": settings.subscription_id,
                "resource_group": settings.resource_group,
                "portal_url": settings.cloud.portal_url,
            },
        )

    # -- waiting ------------------------------------------------------------------------------------------
    def _watcher(self, job_id: str, submission: JobSubmission) -> JobWatcher:
        specs = submission.tasks
        extras = submission.extras
        state = WatchState(
            job_id=job_id,
            expected_tasks=len(specs),
            streamed=[spec.id for spec in specs[: self.max_streamed_tasks]] if self.stream_output else [],
            pool_id=submission.pool_id,
            pool_check_interval=config.get_float("pool_check_interval"),
            log_location={"container": extras.log_container, "prefix": self.logs_prefix}
            if extras.log_container
            else None,
        )
        return JobWatcher(state, stream_output=self.stream_output)

    def _wait(self, hook: AzureBatchHook, watcher: JobWatcher) -> None:
        max_bytes = config.get_int("max_read_bytes")
        fallback = hook.log_reader(watcher.state.log_location)
        kill_handled = False
        while not watch_step(hook.client, watcher, self._emit, max_bytes=max_bytes, fallback=fallback):
            if self._killed and not kill_handled:
                # Airflow lets execute() go on after on_kill: end the job here, then report it like any other.
                kill_handled = True
                self._end_killed_job(watcher.state.job_id)
                continue
            time.sleep(self.poll_interval)

    def _flush(self, hook: AzureBatchHook, watcher: JobWatcher) -> None:
        """Print output the trigger had not printed yet (finished streams are skipped by their cursors)."""
        max_bytes = config.get_int("max_read_bytes")
        fallback = hook.log_reader(watcher.state.log_location)
        try:
            if not watcher.job_over():
                watch_step(hook.client, watcher, self._emit, max_bytes=max_bytes, fallback=fallback)
            for _ in range(100):  # bounded: each round reads up to max_read_bytes per stream
                pending = [item for item in watcher.streams_to_read() if item[2]]
                if not pending:
                    return
                watch_step(hook.client, watcher, self._emit, max_bytes=max_bytes, fallback=fallback)
        except PoolProblem:
            return  # the job is over anyway; the report below says what happened

    def _defer(self, context: Context, watcher: JobWatcher) -> None:
        deadline = None
        timeout = None
        if self.execution_timeout is not None:
            started = getattr(context["ti"], "start_date", None) or datetime.now(timezone.utc)
            end = started + self.execution_timeout
            deadline = end.timestamp()
            timeout = max(end - datetime.now(timezone.utc), timedelta(seconds=1)) + TIMEOUT_PADDING
        self.defer(
            trigger=AzureBatchJobTrigger(
                azbatch_conn_id=self.azbatch_conn_id,
                watch_state=watcher.state.to_json(),
                poll_interval=self.poll_interval,
                deadline=deadline,
                stream_output=self.stream_output,
                max_read_bytes=config.get_int("max_read_bytes"),
                max_outage=self.max_outage,
                terminate_on_kill=True,
            ),
            method_name="execute_complete",
            timeout=timeout,
        )

    def _emit(self, line: str) -> None:
        self.log.info("%s", line)

    # -- the end ------------------------------------------------------------------------------------------
    def _finish(self, hook: AzureBatchHook, watcher: JobWatcher) -> dict[str, Any]:
        job_id = watcher.state.job_id
        listed, unsuccessful, total = collect_outcomes(hook.client, job_id)
        job = hook.get_job(job_id, select=["id", "state", "executionInfo"])
        reason = getattr(job.execution_info, "termination_reason", None) if job is not None else None
        counts = hook.get_task_counts(job_id)
        self.log.info("Batch job %s: %d of %d tasks succeeded", job_id, counts.succeeded, total)
        report = None
        if unsuccessful:
            report = failure_report(
                hook.client,
                job_id,
                unsuccessful,
                total,
                tail_lines=self.failure_tail_lines,
                terminate_reason=reason,
                fallback=hook.log_reader(watcher.state.log_location),
            )
        self._clean_up(hook, job_id, succeeded=report is None)
        if report is not None:
            raise AirflowException(report)
        return {
            "job_id": job_id,
            "pool_id": watcher.state.pool_id,
            "job_state": enum_value(job.state) if job is not None else None,
            "terminate_reason": reason,
            "task_counts": counts.to_json(),
            "tasks": {outcome.id: outcome.to_json() for outcome in listed},
            "tasks_truncated": total > len(listed),
        }

    def _clean_up(self, hook: AzureBatchHook, job_id: str, *, succeeded: bool) -> None:
        if self.on_finish_action == "delete_job" or (self.on_finish_action == "delete_succeeded_job" and succeeded):
            self.log.info("Deleting Batch job %s (on_finish_action=%s)", job_id, self.on_finish_action)
            try:
                hook.delete_job(job_id)
            except Exception as exc:
                self.log.warning("Could not delete Batch job %s: %s", job_id, describe_error(exc))

    def _terminate_for_timeout(self, job_id: str) -> None:
        self.log.error("Batch job %s ran past execution_timeout (%s): terminating it", job_id, self.execution_timeout)
        self._terminate(job_id, "AirflowExecutionTimeout")

    def _terminate(self, job_id: str, reason: str) -> None:
        try:
            self.hook.terminate_job(job_id, reason=reason, wait=True)
        except Exception as exc:
            self.log.error("Could not terminate Batch job %s: %s", job_id, describe_error(exc))

    def _claim(self, job_id: str) -> None:
        """This try is submitting to (or reattaching to) ``job_id``: a kill from now on terminates it."""
        self._submitted_job_id = job_id

    def on_kill(self) -> None:
        # Airflow calls this from its SIGTERM handler, which may have interrupted this thread while it held a
        # log writer's lock (structlog's are not reentrant) or was inside the client's connection pool.
        # Logging or HTTP here could deadlock, so the handler only starts a thread; the wait loop sees
        # ``_killed``, lets that thread finish and makes sure the job has ended.
        self._killed = True
        job_id = self._submitted_job_id
        if job_id is None or self._kill_thread is not None:
            return  # not submitted yet: execute() terminates the job once the submission returns
        self._kill_thread = threading.Thread(
            target=self._terminate_on_kill, args=(job_id,), name="azbatch-on-kill", daemon=True
        )
        self._kill_thread.start()

    def _terminate_on_kill(self, job_id: str) -> None:
        self.log.info("Terminating Batch job %s (the Airflow task was killed)", job_id)
        try:
            self.hook.terminate_job(job_id, reason="AirflowTaskKilled", client=self.hook.new_client())
        except Exception as exc:  # the wait loop tries again; say what happened
            self.log.error("Could not terminate Batch job %s: %s", job_id, describe_error(exc))

    def _end_killed_job(self, job_id: str) -> None:
        if self._kill_thread is not None:
            self._kill_thread.join(timeout=KILL_THREAD_WAIT_SECONDS)
        else:
            self.log.info("Terminating Batch job %s (the Airflow task was killed)", job_id)
        self._terminate(job_id, "AirflowTaskKilled")  # a no-op when the job already ended; waits until it has


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

"""``AzureBatchJobOperator``: submit a Batch job, stream its tasks' output, succeed iff all tasks did."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowException, AirflowTaskTimeout, TaskDeferralError, TaskDeferralTimeout
from airflow_provider_azbatch.compute import load_catalog
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.exceptions import AzureBatchValidationError, QuotaReachedError
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.hooks.errors import describe_error, is_auth_failure
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.links.job import LINK_XCOM_KEY, AzureBatchJobLink, link_data
from airflow_provider_azbatch.pools.health import PoolProblem
from airflow_provider_azbatch.pools.preparation import prepare_pool
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.results.cost import CostReport, auto_pool_cost, node_spans, shared_pool_cost
from airflow_provider_azbatch.results.failure_report import failure_report
from airflow_provider_azbatch.results.outcomes import JobOutcomes
from airflow_provider_azbatch.results.summary import summary_lines
from airflow_provider_azbatch.submission import validation as check
from airflow_provider_azbatch.submission.blob_io import parse_inputs, parse_outputs
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.job_ids import TASK_INSTANCE_KEYS, default_job_id, task_instance_metadata
from airflow_provider_azbatch.submission.options import BlobOptions, ContainerOptions, FanOut, merge
from airflow_provider_azbatch.submission.prepare import registry_credentials, task_extras
from airflow_provider_azbatch.submission.reattach import remember_job, remembered_job, submit_or_reattach
from airflow_provider_azbatch.submission.tasks import TaskSpec, parse_tasks
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.triggers.wait import AzureBatchWaitTrigger
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.factory import configured_watcher
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS, OutagePolicy, WaitFailed
from airflow_provider_azbatch.watching.state import TERMINAL_JOB_STATES, WatchState
from airflow_provider_azbatch.workspace.spec import METADATA_KEY as WORKSPACE_METADATA_KEY
from airflow_provider_azbatch.workspace.spec import Workspace
from airflow_provider_azbatch.workspace.staging import stage_workspaces

if TYPE_CHECKING:
    from airflow.sdk import Context

ON_FINISH_ACTIONS = ("keep_job", "delete_job", "delete_succeeded_job")
# The trigger's own timeout event fires this long before Airflow's deferral timeout would (measured worst
# case at 1,000 deferred jobs: a few seconds; see bench/).
TIMEOUT_PADDING = timedelta(seconds=60)
# How long the wait loop lets on_kill's terminate request finish before it sends its own.
KILL_THREAD_WAIT_SECONDS = 30
# Rounds of reading left-over output after the trigger's event (each reads up to max_read_bytes per stream).
MAX_FLUSH_ROUNDS = 100


# The operator's own names of option fields given flat (``image=`` rather than ``containers=``).
_FLAT_NAMES = {"run_options": "container_run_options", "working_directory": "container_working_directory"}


def _holds_template(value: Any) -> bool:
    """Whether a (nested) value holds a Jinja template, which only the task's run can fill."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(_holds_template(key) or _holds_template(item) for key, item in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(_holds_template(item) for item in value)
    fields = getattr(value, "template_fields", None)
    if fields is not None and not isinstance(value, BaseOperator):
        return any(_holds_template(getattr(value, name, None)) for name in fields)
    return False


@dataclass
class _Checked:
    specs: list[TaskSpec] = field(default_factory=list)
    inputs: tuple[Any, ...] = ()
    outputs: tuple[Any, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    display_name: str | None = None
    workspace: Workspace | None = None


def _workspaces(job: Any) -> list[str]:
    """The content hashes of the workspaces the job's tasks got (recorded on the job at submission)."""
    value = next(
        (item.value for item in (getattr(job, "metadata", None) or []) if item.name == WORKSPACE_METADATA_KEY), ""
    )
    return [sha for sha in value.split(",") if sha]


def _default_deferrable() -> bool:
    from airflow_provider_azbatch.compat import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


class AzureBatchJobOperator(BaseOperator):
    """Run one Azure Batch job and wait for it, showing its tasks' output in the Airflow log.

    What to run (one of):

    :param command: one task: the shell command it runs (``/bin/sh -c`` on Linux nodes).
    :param tasks: several tasks, each a mapping (or :class:`~airflow_provider_azbatch.submission.tasks.TaskSpec`)
        with ``id`` and ``command_line`` and optionally ``environment``, ``max_retries``, ``max_wall_clock``,
        ``depends_on``, ``required_slots``, ``display_name``, ``image``, ``num_nodes``,
        ``coordination_command``, ``inputs``, ``outputs``.
    :param fan_out: one task per item of a list: a
        :class:`~airflow_provider_azbatch.submission.options.FanOut` (or the flat ``command_template``,
        ``parameters``, ``task_id_prefix``).

    Where it runs (one of):

    :param pool_id: an existing pool (shorthand for ``batch_pool=BatchPool.existing(pool_id)``).
    :param batch_pool: a :class:`~airflow_provider_azbatch.pools.strategy.BatchPool`: ``existing``
        (checked: exists, VM size fits ``requirements``), ``shared`` (a named pool created from resource
        requirements if missing) or ``auto`` (a pool made for the job and deleted with it).

    Job settings:

    :param job_id: the Batch job id; default: derived from DAG, task, run and map index, so a retry of the
        same task instance finds the job an earlier try submitted.
    :param display_name: the job's display name (at most 1,024 characters).
    :param environment: environment variables for every task of the job.
    :param metadata: name/value strings stored on the job.
    :param max_task_retries: how often the service retries a failed task (-1: without limit); a task's own
        ``max_retries`` wins.
    :param max_wall_clock: longest a task may run (timedelta or seconds); a task's own value wins.
    :param job_max_wall_clock: longest the whole job may run before the service terminates it.
    :param max_parallel_tasks: most tasks of the job running at once.
    :param num_nodes: with ``command``: run it as a multi-node task on this many nodes.
    :param coordination_command: with ``num_nodes``: what every node runs first.
    :param containers: a :class:`~airflow_provider_azbatch.submission.options.ContainerOptions` (or the flat
        ``image``, ``registry_conn_id``, ``container_run_options``, ``container_working_directory``).
    :param blob: a :class:`~airflow_provider_azbatch.submission.options.BlobOptions` (or the flat ``inputs``,
        ``outputs``, ``output_container``, ``upload_logs``, ``logs_prefix``, ``output_identity``).
    :param workspace: a local directory (absolute, or relative to the DAG file), or a
        :class:`~airflow_provider_azbatch.workspace.Workspace`: packed (ignore rules, size limit), staged in
        Blob once per content and unpacked into every task's ``workspace/`` (``$AZBATCH_WORKSPACE``) before its
        command runs; a task's own ``workspace`` wins.

    Waiting:

    :param azbatch_conn_id: the ``azbatch`` connection (default ``[azbatch] default_conn_id``).
    :param deferrable: wait in the triggerer instead of holding a worker slot (default
        ``[operators] default_deferrable``).
    :param poll_interval: seconds between polls (default ``[azbatch] poll_interval``).
    :param stream_output: show task stdout/stderr in the Airflow log (default ``[azbatch] stream_task_output``).
    :param max_streamed_tasks: show live output of at most this many tasks, the first ones submitted
        (default ``[azbatch] max_streamed_tasks``); stderr of failed tasks is always shown at the end.
    :param failure_tail_lines: stderr lines quoted in the error for a failed task.
    :param max_outage: seconds of Batch service errors a wait rides out before failing.
    :param on_finish_action: ``keep_job`` (default), ``delete_job`` or ``delete_succeeded_job``.
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
        "fan_out",
        "containers",
        "blob",
        "workspace",
    )
    template_fields_renderers = {
        "tasks": "json",
        "environment": "json",
        "metadata": "json",
        "command": "bash",
    }
    ui_color = "#cfe8fc"
    operator_extra_links = (AzureBatchJobLink(),)

    def __init__(
        self,
        *,
        command: str | None = None,
        tasks: Sequence[Mapping[str, Any] | TaskSpec] | None = None,
        fan_out: FanOut | None = None,
        pool_id: str | None = None,
        batch_pool: BatchPool | None = None,
        job_id: str | None = None,
        display_name: str | None = None,
        environment: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        max_task_retries: int | None = None,
        max_wall_clock: timedelta | float | None = None,
        job_max_wall_clock: timedelta | float | None = None,
        max_parallel_tasks: int | None = None,
        num_nodes: int = 1,
        coordination_command: str | None = None,
        containers: ContainerOptions | None = None,
        blob: BlobOptions | None = None,
        workspace: str | Workspace | None = None,
        azbatch_conn_id: str | None = None,
        deferrable: bool | None = None,
        poll_interval: float | None = None,
        stream_output: bool | None = None,
        max_streamed_tasks: int | None = None,
        failure_tail_lines: int | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS,
        on_finish_action: str = "keep_job",
        force_new_job: bool = False,
        # Flat forms of the option groups above.
        command_template: str | None = None,
        parameters: Sequence[Any] | None = None,
        task_id_prefix: str | None = None,
        image: str | None = None,
        registry_conn_id: str | None = None,
        container_run_options: str | None = None,
        container_working_directory: str | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        output_container: str | None = None,
        upload_logs: bool | None = None,
        logs_prefix: str | None = None,
        output_identity: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Everything not templated is checked here, so a mistake fails the DAG file, not a run.
        if (pool_id is None) == (batch_pool is None):
            raise check.fail(
                "pool_id",
                "or batch_pool must be given, not both: an existing pool id, or BatchPool.existing/shared/auto",
            )
        if batch_pool is not None and not isinstance(batch_pool, BatchPool):
            raise check.fail(
                "batch_pool", f"must be a BatchPool (existing, shared or auto), got {type(batch_pool).__name__}"
            )
        self.batch_pool = batch_pool
        self.pool_id = pool_id if pool_id is not None else batch_pool.pool_id  # type: ignore[union-attr]
        self.command = command
        self.tasks = tasks
        if fan_out is not None and (command_template is not None or parameters is not None):
            raise check.fail("command_template", "is also set in fan_out: give fan_out or command_template, not both")
        if fan_out is None and command_template is not None:
            fan_out = FanOut(command_template, parameters if parameters is not None else [], task_id_prefix or "task")
        elif parameters is not None:
            raise check.fail("parameters", "only go with command_template")
        self.fan_out = fan_out
        self.containers: ContainerOptions = merge(
            "containers",
            containers,
            {
                "image": image,
                "registry_conn_id": registry_conn_id,
                "run_options": container_run_options,
                "working_directory": container_working_directory,
            },
            ContainerOptions,
            aliases={"run_options": "container_run_options", "working_directory": "container_working_directory"},
        )
        self.blob: BlobOptions = merge(
            "blob",
            blob,
            {
                "inputs": inputs,
                "outputs": outputs,
                "output_container": output_container,
                "upload_logs": upload_logs,
                "logs_prefix": logs_prefix,
                "output_identity": output_identity,
            },
            BlobOptions,
        )
        self.workspace = workspace
        self.job_id = job_id
        self.display_name = display_name
        self.environment = environment
        self.metadata = metadata
        self.max_task_retries = check.retries(max_task_retries, "max_task_retries")
        self.max_wall_clock = check.duration(max_wall_clock, "max_wall_clock")
        self.job_max_wall_clock = check.duration(job_max_wall_clock, "job_max_wall_clock")
        self.max_parallel_tasks = (
            None if max_parallel_tasks is None else check.integer(max_parallel_tasks, "max_parallel_tasks", minimum=1)
        )
        self.num_nodes = check.integer(num_nodes, "num_nodes", minimum=1)
        self.coordination_command = coordination_command
        self.azbatch_conn_id = check.text(azbatch_conn_id, "azbatch_conn_id") or config.get_str("default_conn_id")
        self.deferrable = deferrable if deferrable is not None else _default_deferrable()
        self.poll_interval = check.number(
            poll_interval if poll_interval is not None else config.get_float("poll_interval"),
            "poll_interval",
            maximum=3600,
        )
        self.stream_output = stream_output if stream_output is not None else config.get_bool("stream_task_output")
        self.max_streamed_tasks = check.integer(
            max_streamed_tasks if max_streamed_tasks is not None else config.get_int("max_streamed_tasks"),
            "max_streamed_tasks",
            minimum=0,
            maximum=1000,
        )
        self.failure_tail_lines = check.integer(
            failure_tail_lines if failure_tail_lines is not None else config.get_int("failure_tail_lines"),
            "failure_tail_lines",
            minimum=0,
            maximum=10000,
        )
        self.max_outage = check.number(max_outage, "max_outage")
        if on_finish_action not in ON_FINISH_ACTIONS:
            raise check.fail(
                "on_finish_action", f"must be one of {', '.join(ON_FINISH_ACTIONS)}, got {on_finish_action!r}"
            )
        self.on_finish_action = on_finish_action
        for name, value in (
            ("deferrable", self.deferrable),
            ("stream_output", self.stream_output),
            ("force_new_job", force_new_job),
        ):
            if not isinstance(value, bool):
                raise check.fail(name, f"must be True or False, got {value!r}")
        self.force_new_job = force_new_job
        # How errors name option fields: ``containers.image`` when given as objects, ``image`` when flat.
        self._names = {
            "containers": None if containers is not None else _FLAT_NAMES,
            "blob": None if blob is not None else _FLAT_NAMES,
        }
        self._checked(rendered=False)
        self._submitted_job_id: str | None = None
        self._killed = False
        self._kill_thread: threading.Thread | None = None

    @cached_property
    def hook(self) -> AzureBatchHook:
        return AzureBatchHook(self.azbatch_conn_id)

    # -- execution ------------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        return self._submit_and_wait(context, quota_since=None)

    def execute_after_quota_wait(
        self, context: Context, event: dict[str, Any] | None = None, quota_since: float | None = None
    ) -> dict[str, Any]:
        """Resumed after waiting (in the triggerer) for the account to get below its quota: try again."""
        return self._submit_and_wait(context, quota_since=quota_since)

    def _submit_and_wait(self, context: Context, quota_since: float | None) -> dict[str, Any]:
        while True:
            try:
                # Both can meet a quota: creating a shared pool, creating the job.
                submission = self._submission(context)
                attachment = self._attach(context, submission)
                break
            except QuotaReachedError as exc:
                quota_since = self._wait_for_quota(exc, quota_since)
        job_id = attachment.job_id
        if self._killed:
            # Killed while submitting: the job may have been created after on_kill looked for it.
            self._end_killed_job(job_id)
            raise AirflowException(f"The task was killed while submitting Batch job {job_id}; the job was terminated")
        self._publish_job(context, job_id)
        watcher = self._watcher(self._watch_state(job_id, submission))
        if attachment.finished:
            return self._finish(context, watcher)
        if self.deferrable:
            self._defer(context, watcher)
        try:
            self._wait(watcher)
        except PoolProblem as problem:
            self._terminate(job_id, "PoolProblem")
            raise AirflowException(f"Batch job {job_id} cannot run: {problem}; the job was terminated") from None
        except AirflowTaskTimeout:
            self._terminate_for_timeout(job_id)
            raise AirflowTaskTimeout(
                f"Batch job {job_id} did not finish within execution_timeout ({self.execution_timeout}); "
                "the Batch job was terminated"
            ) from None
        return self._finish(context, watcher)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: flush what it did not print, then report like the sync path."""
        if not event or "watch_state" not in event:
            raise AirflowException(f"The Batch trigger sent no usable event ({event!r})")
        watcher = self._watcher(WatchState.from_json(event["watch_state"]))
        job_id = watcher.state.job_id
        self._submitted_job_id = job_id
        status = event.get("status")
        if status == "timeout":
            self._terminate_for_timeout(job_id)
            self._flush(watcher)
            raise AirflowException(
                f"Batch job {job_id} did not finish within execution_timeout ({self.execution_timeout}); "
                "the Batch job was terminated"
            )
        if status == "error":
            if event.get("pool_problem"):
                self._terminate(job_id, "PoolProblem")
                raise AirflowException(f"Batch job {job_id} cannot run: {event['message']}; the job was terminated")
            raise AirflowException(event.get("message") or f"Waiting for Batch job {job_id} failed")
        self._flush(watcher)
        return self._finish(context, watcher)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """The deferral ended without an event (Airflow's own deferral timeout, a trigger that crashed): the
        Batch job must not run on unwatched, so it is terminated before the task fails."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except (TaskDeferralTimeout, TaskDeferralError):
            job_id = self._job_of(context)
            if job_id is not None:
                self.log.error("The wait for Batch job %s ended without an event: terminating the job", job_id)
                self._terminate(job_id, "AirflowDeferralEnded")
            raise

    # -- submission -----------------------------------------------------------------------------------
    def _checked(self, *, rendered: bool) -> _Checked:
        """Every rule a value must keep, without I/O. Before rendering (when the DAG is defined) only the
        groups of fields that hold no template are checked; after it (when the task runs) all of them."""

        def ready(*values: Any) -> bool:
            return rendered or not any(_holds_template(value) for value in values)

        checked = _Checked()
        if ready(self.command, self.tasks, self.fan_out, self.coordination_command):
            checked.specs = self._specs()
        if ready(self.blob):
            checked.inputs = parse_inputs(self.blob.inputs, "inputs")
            checked.outputs = parse_outputs(self.blob.outputs, "outputs")
            self.blob.check(self._names["blob"])
        if ready(self.containers):
            self.containers.check(self._names["containers"])
        if ready(self.workspace):
            checked.workspace = Workspace.parse(self.workspace, "workspace")
        if self.job_id is not None and ready(self.job_id):
            check.batch_id(self.job_id, "job_id", "Batch job id")
        if ready(self.environment):
            checked.environment = check.environment(self.environment, "environment")
        if ready(self.metadata):
            checked.metadata = check.metadata(self.metadata, "metadata")
            for reserved in (LogLocation.METADATA_KEY, WORKSPACE_METADATA_KEY, *TASK_INSTANCE_KEYS):
                if reserved in checked.metadata:
                    raise check.fail(f"metadata[{reserved!r}]", "is set by the operator itself: use another name")
        if ready(self.display_name):
            checked.display_name = check.text(self.display_name, "display_name", max_chars=check.MAX_DISPLAY_NAME)
        if self.batch_pool is None and ready(self.pool_id):
            check.batch_id(self.pool_id, "pool_id", "Batch pool id")
        return checked

    def _submission(self, context: Context) -> JobSubmission:
        """Everything checked and prepared (pool, storage access, registry) before anything is submitted."""
        checked = self._checked(rendered=True)
        specs, inputs, outputs, metadata = checked.specs, checked.inputs, checked.outputs, checked.metadata
        environment, display_name = checked.environment, checked.display_name
        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        map_index = getattr(context["ti"], "map_index", None)
        map_index = -1 if map_index is None else map_index
        job_id = self.job_id or default_job_id(dag_id, self.task_id, run_id, map_index)
        # Which task instance submitted the job: the command line finds and filters jobs by it.
        metadata.update(task_instance_metadata(dag_id, self.task_id, run_id, map_index))
        pool = self.batch_pool or BatchPool.existing(str(self.pool_id))
        with self._explained_failures():
            registry = registry_credentials(self.hook, self.containers)
            extras = task_extras(
                self.hook,
                specs,
                self.containers,
                registry,
                self.blob,
                inputs,
                outputs,
                timedelta(hours=config.get_float("sas_hours")),
            )
            extras.workspaces, packed = stage_workspaces(
                self.hook,
                specs,
                checked.workspace,
                Path(context["dag"].fileloc).parent,
                timedelta(hours=config.get_float("sas_hours")),
                self.log,
            )
            pool_id, auto_pool = prepare_pool(
                self.hook, pool, specs, job_image=self.containers.image, registry=registry, log=self.log
            )
        if packed:
            metadata[WORKSPACE_METADATA_KEY] = ",".join(workspace.sha256 for workspace in packed)
        if extras.log_container:
            # Kept with the job, so that anyone watching it later (the sensor, the CLI) finds its uploaded logs.
            metadata[LogLocation.METADATA_KEY] = LogLocation(extras.log_container, self.blob.logs_prefix).to_metadata()
        return JobSubmission(
            job_id=job_id,
            pool_id=pool_id,
            tasks=specs,
            environment=environment,
            metadata=metadata,
            default_retries=self.max_task_retries,
            default_wall_clock=self.max_wall_clock,
            job_max_wall_clock=self.job_max_wall_clock,
            display_name=display_name,
            max_parallel_tasks=self.max_parallel_tasks,
            auto_pool=auto_pool,
            auto_pool_prefix=pool.auto_pool_prefix,
            extras=extras,
        )

    def _specs(self) -> list[TaskSpec]:
        fan_out = self.fan_out
        if fan_out is not None and not isinstance(fan_out, FanOut):
            raise check.fail("fan_out", f"must be a FanOut, got {type(fan_out).__name__} {fan_out!r}")
        return parse_tasks(
            self.command,
            self.tasks,
            command_template=fan_out.command_template if fan_out else None,
            parameters=fan_out.parameters if fan_out else None,
            task_id_prefix=fan_out.task_id_prefix if fan_out else "task",
            num_nodes=self.num_nodes,
            coordination_command=self.coordination_command,
        )

    def _attach(self, context: Context, submission: JobSubmission) -> Any:
        with self._explained_failures():
            return submit_or_reattach(
                self.hook,
                submission,
                remembered=remembered_job(context),
                remember=lambda job_id: remember_job(context, job_id),
                force_new=self.force_new_job,
                log=self.log,
                claim=self._claim,
                operator=type(self).__name__,
            )

    @contextlib.contextmanager
    def _explained_failures(self) -> Iterator[None]:
        """A refused credential says which connection and what to check, before anything is submitted."""
        try:
            yield
        except Exception as exc:
            if not is_auth_failure(exc):
                raise
            hint = self.hook.settings.credentials_hint()
            raise AzureBatchValidationError(
                f"Connection '{self.azbatch_conn_id}'",
                f"was refused by the Batch account ({describe_error(exc)}): {hint}",
            ) from None

    def _wait_for_quota(self, exc: QuotaReachedError, quota_since: float | None) -> float:
        """Wait for the account to get below its quota, within ``[azbatch] quota_wait_seconds``; when the quota
        was first met. Deferrable: the wait happens in the triggerer (the worker slot is freed between attempts)."""
        limit = config.get_float("quota_wait_seconds")
        since = quota_since if quota_since is not None else time.time()
        waited = time.time() - since
        if waited >= limit:
            raise AirflowException(
                f"{exc}. It did not clear within {waited:.0f} s ([azbatch] quota_wait_seconds = {limit:g}): "
                "ask for a higher quota, or run fewer jobs at once"
            ) from None
        delay = min(config.get_float("quota_retry_seconds"), limit - waited)
        if quota_since is None:
            self.log.warning(
                "%s. Waiting for it to clear: trying again every %.0f s for at most %.0f s", exc, delay, limit
            )
        else:
            self.log.info("Still at the quota after %.0f s; trying again in %.0f s", waited, delay)
        if self.deferrable:
            self.defer(
                trigger=AzureBatchWaitTrigger(time.time() + delay, reason=exc.code),
                method_name="execute_after_quota_wait",
                kwargs={"quota_since": since},
            )
        time.sleep(delay)
        return since

    def _publish_job(self, context: Context, job_id: str) -> None:
        context["ti"].xcom_push(key=LINK_XCOM_KEY, value=link_data(self.hook, job_id))

    def _job_of(self, context: Context) -> str | None:
        """The job this task instance submitted (for a wait that ended without an event)."""
        job_id = remembered_job(context)
        if job_id is None:
            link = context["ti"].xcom_pull(task_ids=self.task_id, key=LINK_XCOM_KEY)
            job_id = link.get("job_id") if isinstance(link, dict) else None
        return job_id

    # -- waiting --------------------------------------------------------------------------------------
    def _watch_state(self, job_id: str, submission: JobSubmission) -> WatchState:
        specs = submission.tasks
        extras = submission.extras
        return WatchState(
            job_id=job_id,
            expected_tasks=len(specs),
            streamed=[spec.id for spec in specs[: self.max_streamed_tasks]] if self.stream_output else [],
            pool_id=submission.pool_id,
            pool_check_interval=config.get_float("pool_check_interval"),
            log_location=LogLocation(extras.log_container, self.blob.logs_prefix).to_json()
            if extras.log_container
            else None,
            auto_pool_vm_size=str(submission.auto_pool["vmSize"]) if submission.auto_pool else None,
        )

    def _watcher(self, state: WatchState) -> JobWatcher:
        return configured_watcher(state, self.log, stream_output=self.stream_output, poll_interval=self.poll_interval)

    def _wait(self, watcher: JobWatcher) -> None:
        policy = OutagePolicy(watcher.state.job_id, self.max_outage)
        kill_handled = False
        while True:
            try:
                if run_sync(watcher.step(time.time()), self.hook):
                    return
                policy.succeeded()
                delay = self.poll_interval
            except (PoolProblem, AirflowTaskTimeout):
                raise
            except Exception as exc:
                try:
                    delay = policy.delay_after(exc, time.monotonic())
                except WaitFailed as failed:
                    raise AirflowException(str(failed)) from None
                self.log.warning(
                    "Transient error from the Batch service (%s); retrying in %.1f s", describe_error(exc), delay
                )
            if self._killed and not kill_handled:
                # Airflow lets execute() go on after on_kill: end the job here, then report it like any other.
                kill_handled = True
                self._end_killed_job(watcher.state.job_id)
                continue
            time.sleep(delay)

    def _flush(self, watcher: JobWatcher) -> None:
        """Print output the trigger had not printed yet (finished streams are skipped by their cursors)."""
        try:
            for _ in range(MAX_FLUSH_ROUNDS):
                run_sync(watcher.step(time.time()), self.hook)
                if not watcher.unfinished_output():
                    return
        except PoolProblem:
            return  # the job is over anyway; the report below says what happened
        except Exception as exc:
            self.log.warning("Could not show the rest of the output: %s", describe_error(exc))

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
                deferred_at=time.time(),
            ),
            method_name="execute_complete",
            timeout=timeout,
        )

    # -- the end --------------------------------------------------------------------------------------
    def _finish(self, context: Context, watcher: JobWatcher) -> dict[str, Any]:
        hook = self.hook
        job_id = watcher.state.job_id
        outcomes = JobOutcomes.collect(hook.list_task_outcomes(job_id))
        job = hook.get_job(job_id, select=["id", "state", "executionInfo", "metadata"])
        reason = getattr(job.execution_info, "termination_reason", None) if job is not None else None
        counts = hook.get_task_counts(job_id)
        self.log.info("Batch job %s: %d of %d tasks succeeded", job_id, counts.succeeded, outcomes.total)
        for line in summary_lines(job_id, outcomes):
            self.log.info("%s", line)
        cost = self._cost(watcher, job, outcomes)
        for line in cost.lines() if cost is not None else []:
            self.log.info("%s", line)
        report = None
        if outcomes.unsuccessful:
            report = run_sync(
                failure_report(
                    job_id,
                    outcomes,
                    tail_lines=self.failure_tail_lines,
                    terminate_reason=reason,
                    log_location=watcher.state.log_location,
                ),
                hook,
            )
        self._clean_up(context, job_id, succeeded=report is None)
        if report is not None:
            raise AirflowException(report)
        return {
            "job_id": job_id,
            "pool_id": watcher.state.pool_id,
            "job_state": enum_value(job.state) if job is not None else None,
            "terminate_reason": reason,
            "task_counts": counts.to_json(),
            "tasks": {outcome.id: outcome.to_json() for outcome in outcomes.listed},
            "tasks_truncated": outcomes.total > len(outcomes.listed),
            "workspaces": _workspaces(job),
            "cost": cost.to_json() if cost is not None else None,
        }

    def _cost(self, watcher: JobWatcher, job: Any, outcomes: JobOutcomes) -> CostReport | None:
        """What the job cost (an estimate from list prices); None when its pool is not known any more."""
        state = watcher.state
        pool_id = state.pool_id or getattr(getattr(job, "execution_info", None), "pool_id", None)
        try:
            catalog = load_catalog()
            if state.auto_pool_vm_size is not None:
                ended = getattr(getattr(job, "execution_info", None), "end_time", None) or datetime.now(timezone.utc)
                job_state = enum_value(job.state) if job is not None else state.job_state
                if job_state not in TERMINAL_JOB_STATES and pool_id:
                    # Still running (a job kept for on_finish_action, a timeout): its nodes as they are now.
                    watcher.observe_nodes(self.hook.list_pool_nodes(pool_id), time.time())
                return auto_pool_cost(state.auto_pool_vm_size, node_spans(state.nodes, ended), outcomes.listed, catalog)
            if pool_id is None:
                return None
            pool = self.hook.get_pool(pool_id, select=["id", "vmSize", "taskSlotsPerNode"])
            if pool is None:
                return None
            dedicated = {node.id: node.dedicated for node in self.hook.list_pool_nodes(pool_id) or []}
            return shared_pool_cost(pool.vm_size, pool.task_slots_per_node or 1, dedicated, outcomes.listed, catalog)
        except Exception as exc:  # an estimate must never fail the task
            self.log.warning("No cost estimate for Batch job %s: %s", state.job_id, describe_error(exc))
            return None

    def _clean_up(self, context: Context, job_id: str, *, succeeded: bool) -> None:
        if self.on_finish_action == "delete_job" or (self.on_finish_action == "delete_succeeded_job" and succeeded):
            self.log.info("Deleting Batch job %s (on_finish_action=%s)", job_id, self.on_finish_action)
            try:
                self.hook.delete_job(job_id)
            except Exception as exc:
                self.log.warning("Could not delete Batch job %s: %s", job_id, describe_error(exc))
                return
            # The link now shows the account's jobs instead of a job that is gone.
            context["ti"].xcom_push(key=LINK_XCOM_KEY, value={**link_data(self.hook, job_id), "deleted": True})

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

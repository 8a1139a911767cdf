"""``AzureBatchJobOperator``: submit a Batch job, stream its tasks' output, succeed iff all tasks did.

The operator is the Airflow face of a run (:mod:`airflow_provider_azbatch.runs`): it checks its parameters
when the DAG is defined, and turns ``execute``, a deferral's resumption and ``on_kill`` into the run's steps,
and the run's results into a return value (XCom), an exception, or a deferral.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import (
    AirflowException,
    AirflowSkipException,
    TaskDeferralError,
    TaskDeferralTimeout,
)
from airflow_provider_azbatch.exceptions import QuotaReachedError
from airflow_provider_azbatch.lineage.outlets import add_outlets, declared_assets, record_events
from airflow_provider_azbatch.lineage.parent import parent_environment
from airflow_provider_azbatch.links.job import LINK_XCOM_KEY, AzureBatchJobLink, link_data
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.runs import Expectations, RunResult, RunSettings, TaskInstanceRef, event_in_full
from airflow_provider_azbatch.runs.face import RunFace
from airflow_provider_azbatch.runs.lifecycle import deferral_deadline
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.job_side_tasks import JobSideTask
from airflow_provider_azbatch.specs.operator_options import (
    BLOB,
    CONTAINERS,
    FAN_OUT,
    FLAT_NAMES,
    JOB,
    NAMES,
    RUN,
    fan_out_of,
    going_to,
    group_of,
    refuse_unknown_arguments,
    renderers,
    templated,
)
from airflow_provider_azbatch.specs.options import BlobOptions, ContainerOptions, FanOut
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.submission.reattach import remember_job, remembered_job
from airflow_provider_azbatch.submission.request import JobRequest
from airflow_provider_azbatch.triggers.job import CHECKPOINT_KEY
from airflow_provider_azbatch.triggers.wait import AzureBatchWaitTrigger
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS
from airflow_provider_azbatch.workspace.staged_files import FileForTasks

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context
    from airflow.sdk.types import RuntimeTaskInstanceProtocol


def _default_deferrable() -> bool:
    from airflow_provider_azbatch.compat import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


class AzureBatchJobOperator(BaseOperator, RunFace):
    """Run one Azure Batch job and wait for it, showing its tasks' output in the Airflow log.

    .. options: begin (python scripts/operator_options.py writes this list)

    What to run (one of):

    :param command: one task: the shell command it runs (``/bin/sh -c`` on Linux nodes).
    :param tasks: several tasks, each a mapping (or :class:`~airflow_provider_azbatch.specs.tasks.TaskSpec`) with ``id``
        and ``command_line`` and optionally ``environment``, ``max_retries``, ``max_wall_clock``, ``depends_on``,
        ``required_slots``, ``display_name``, ``image``, ``num_nodes``, ``coordination_command``, ``inputs``,
        ``outputs``.
    :param fan_out: one task per item of a list: a :class:`~airflow_provider_azbatch.specs.options.FanOut` (or the flat
        ``command_template``, ``parameters``, ``task_id_prefix``).

    Where it runs (one of):

    :param pool_id: an existing pool (shorthand for ``batch_pool=BatchPool.existing(pool_id)``).
    :param batch_pool: a :class:`~airflow_provider_azbatch.pools.strategy.BatchPool`: ``existing`` (checked: exists, VM
        size fits ``requirements``), ``shared`` (a named pool created from resource requirements if missing) or ``auto``
        (a pool made for the job and deleted with it).

    Job settings:

    :param job_id: the Batch job id; default: derived from DAG, task, run and map index, so a retry of the same task
        instance finds the job an earlier try submitted.
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
    :param containers: a :class:`~airflow_provider_azbatch.specs.options.ContainerOptions` (or the flat ``image``,
        ``registry_conn_id``, ``container_run_options``, ``container_working_directory``).
    :param blob: a :class:`~airflow_provider_azbatch.specs.options.BlobOptions` (or the flat ``inputs``, ``outputs``,
        ``output_container``, ``upload_logs``, ``logs_prefix``, ``output_identity``).
    :param workspace: a local directory (absolute, or relative to the DAG file), or a
        :class:`~airflow_provider_azbatch.workspace.Workspace`: packed (ignore rules, size limit), staged in Blob once
        per content and unpacked into every task's ``workspace/`` (``$AZBATCH_WORKSPACE``) before its command runs; a
        task's own ``workspace`` wins.
    :param priority: the job's priority, -1000 to 1000 (the service's default 0): on a busy pool, a higher priority
        job's tasks start before a lower one's.
    :param run_as: who the tasks run as: ``"admin"``, ``"nonadmin"`` (the pool's automatic user), or a
        :class:`~airflow_provider_azbatch.specs.identity.RunAs` (task scope, or a pool's named user); a task's own
        ``run_as`` wins.
    :param job_overrides: Batch REST job fields (camelCase, or an SDK model) merged over the job the operator builds,
        checked against azure-batch's ``BatchJobCreateOptions`` (see :mod:`airflow_provider_azbatch.specs.overrides`).
    :param task_overrides: Batch REST task fields merged over every task (a task's own ``overrides`` after them),
        checked against ``BatchTaskCreateOptions``.

    Waiting:

    :param azbatch_conn_id: the ``azbatch`` connection (default ``[azbatch] default_conn_id``).
    :param deferrable: wait in the triggerer instead of holding a worker slot (default ``[operators]
        default_deferrable``).
    :param poll_interval: seconds between polls (default ``[azbatch] poll_interval``).
    :param stream_output: show task stdout/stderr in the Airflow log (default ``[azbatch] stream_task_output``).
    :param max_streamed_tasks: show live output of at most this many tasks, the first ones submitted (default
        ``[azbatch] max_streamed_tasks``); stderr of failed tasks is always shown at the end.
    :param failure_tail_lines: stderr lines quoted in the error for a failed task.
    :param max_outage: seconds of Batch service errors a wait rides out before failing.
    :param on_finish_action: ``keep_job`` (default), ``delete_job`` or ``delete_succeeded_job``.
    :param force_new_job: submit a new job even if this task instance already has one.

    When tasks fail (see docs/howto/when-tasks-fail.md):

    :param fail_fast: the first task that fails (after its retries) terminates the job (default ``[azbatch]
        fail_fast``).
    :param exit_conditions: what exit codes do to the job and to dependents, for tasks without their own: a mapping of
        ``exit_codes``, ``exit_code_ranges``, ``pre_processing_error``, ``file_upload_error``, ``default`` to
        ``job_action`` / ``dependency_action`` (see :mod:`~airflow_provider_azbatch.specs.exit_conditions`).
    :param skip_on_exit_code: an exit code or a list of them: a job whose only failures exited with one of them skips
        the Airflow task; a task's own ``skip_on_exit_code`` wins.
    :param job_preparation: a command (or a mapping, or a
        :class:`~airflow_provider_azbatch.specs.job_side_tasks.JobSideTask`) run once per node before the job's first
        task there; if it fails on every node, the wait ends naming it.
    :param job_release: a command (or a mapping) run after the job on each node that ran ``job_preparation``.

    Results:

    :param result_file: a JSON file every task (without its own ``result_file``) writes in its working directory: read
        back when the job succeeded, into the XCom result's ``results`` by task id (a single task's also as
        ``return_value``), at most ``[azbatch] max_result_bytes`` each.

    Flat forms of the option groups above:

    :param command_template: see ``fan_out``.
    :param parameters: see ``fan_out``.
    :param task_id_prefix: see ``fan_out``.
    :param image: see ``containers``.
    :param registry_conn_id: see ``containers``.
    :param container_run_options: see ``containers``.
    :param container_working_directory: see ``containers``.
    :param inputs: see ``blob``.
    :param outputs: see ``blob``.
    :param output_container: see ``blob``.
    :param upload_logs: see ``blob``.
    :param logs_prefix: see ``blob``.
    :param output_identity: see ``blob``.

    .. options: end

    Lineage (see docs/howto/lineage.md): an output with ``"asset": Asset(...)`` adds the asset to ``outlets``; each
    asset among the outlets gets an event of a successful run with the job id, the blobs written and the results as
    its extra. With the OpenLineage provider, the run's events name its Blob inputs and outputs and its Batch job,
    and the Batch tasks get the task's OpenLineage parent run (``OPENLINEAGE_CONTEXT``...).
    """

    template_fields: Sequence[str] = (*templated(), "pool_overrides")
    template_fields_renderers = {**renderers(), "pool_overrides": "json"}
    ui_color = "#cfe8fc"
    # Options this class and its subclasses read back (_take_options sets every option of the declaration).
    command: Any
    tasks: Any
    job_id: Any
    environment: Any
    workspace: Any
    operator_extra_links = (AzureBatchJobLink(),)

    def __init__(
        self,
        *,
        # options: begin (python scripts/operator_options.py writes these parameters from specs/operator_options.py)
        # What to run (one of):
        command: str | None = None,
        tasks: Sequence[Mapping[str, Any] | TaskSpec] | None = None,
        fan_out: FanOut | None = None,
        # Where it runs (one of):
        pool_id: str | None = None,
        batch_pool: BatchPool | None = None,
        # Job settings:
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
        priority: int | str | None = None,
        run_as: str | RunAs | Mapping[str, Any] | None = None,
        job_overrides: Mapping[str, Any] | Any = None,
        task_overrides: Mapping[str, Any] | Any = None,
        # Waiting:
        azbatch_conn_id: str | None = None,
        deferrable: bool | None = None,
        poll_interval: float | None = None,
        stream_output: bool | None = None,
        max_streamed_tasks: int | None = None,
        failure_tail_lines: int | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS,
        on_finish_action: str = "keep_job",
        force_new_job: bool = False,
        # When tasks fail (see docs/howto/when-tasks-fail.md):
        fail_fast: bool | None = None,
        exit_conditions: Mapping[str, Any] | None = None,
        skip_on_exit_code: int | Sequence[int] | None = None,
        job_preparation: str | Mapping[str, Any] | JobSideTask | None = None,
        job_release: str | Mapping[str, Any] | JobSideTask | None = None,
        # Results:
        result_file: str | None = None,
        # Flat forms of the option groups above:
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
        # options: end
        **kwargs: Any,
    ) -> None:
        given = {name: value for name, value in locals().items() if name in NAMES}
        refuse_unknown_arguments(type(self), kwargs)
        super().__init__(**kwargs)
        # Everything not templated is checked here, so a mistake fails the DAG file, not a run.
        self._take_options(given)
        self.job_request().check(rendered=False)
        # Each output's asset among the outlets: Airflow schedules the DAGs waiting for it from the DAG file.
        self.outlets = add_outlets(list(self.outlets or []), declared_assets(self.blob.outputs, self.tasks))
        # How the run ended (and why it failed), for its lineage; the OpenLineage parent run for the Batch tasks.
        self.lineage_result: RunResult | None = None
        self.lineage_failure: str | None = None
        self._lineage_environment: dict[str, str] = {}

    def _take_options(self, given: dict[str, Any]) -> None:
        """Each option checked and put where it goes (specs/operator_options.py), in the declaration's order."""
        pool_id, batch_pool = given["pool_id"], given["batch_pool"]
        if (pool_id is None) == (batch_pool is None):
            raise validation.fail(
                "pool_id",
                "or batch_pool must be given, not both: an existing pool id, or BatchPool.existing/shared/auto",
            )
        if batch_pool is not None and not isinstance(batch_pool, BatchPool):
            raise validation.fail(
                "batch_pool", f"must be a BatchPool (existing, shared or auto), got {type(batch_pool).__name__}"
            )
        self.batch_pool = batch_pool
        self.pool_id = pool_id if pool_id is not None else batch_pool.pool_id  # type: ignore[union-attr]
        self.fan_out = fan_out_of(given)
        self.containers: ContainerOptions = group_of(CONTAINERS, given, ContainerOptions)
        self.blob: BlobOptions = group_of(BLOB, given, BlobOptions)
        for option in going_to(JOB):
            if option.name not in (FAN_OUT, CONTAINERS, BLOB):
                value = given[option.name]
                setattr(self, option.name, option.check(value, option.name) if option.check else value)
        # Rendered here (a BatchPool cannot be rendered in place), given back to the pool when the job is prepared.
        self.pool_overrides = dict(batch_pool.pool_overrides) if batch_pool is not None else {}
        deferrable = given["deferrable"]
        self.deferrable = deferrable if deferrable is not None else _default_deferrable()
        if not isinstance(self.deferrable, bool):
            raise validation.fail("deferrable", f"must be True or False, got {self.deferrable!r}")
        self.run_settings = RunSettings.from_parameters(
            **{option.name: given[option.name] for option in going_to(RUN)}, operator=type(self).__name__
        )
        # How errors name option fields: ``containers.image`` when given as objects, ``image`` when flat.
        self._option_names = {group: None if given[group] is not None else FLAT_NAMES for group in (CONTAINERS, BLOB)}

    # The settings a user may read back from the operator (and ``azbatch_conn_id``, as from the sensor).
    @property
    def poll_interval(self) -> float:
        return self.run_settings.poll_interval

    @property
    def stream_output(self) -> bool:
        return self.run_settings.stream_output

    def files_for_tasks(self) -> Sequence[FileForTasks]:
        """Files staged for the tasks when the job is submitted (the TaskFlow decorator's call)."""
        return ()

    def job_request(self, *, running: bool = False) -> JobRequest:
        """The job this operator asks for, from its (rendered, when ``running``) parameters."""
        pool = self.batch_pool or BatchPool.existing(str(self.pool_id))
        if pool.kind != "existing" and self.pool_overrides != pool.pool_overrides:
            pool = dataclasses.replace(pool, pool_overrides=self.pool_overrides)
        options = {option.target: getattr(self, option.name) for option in going_to(JOB)}
        options["environment"] = self._environment(running)
        return JobRequest(
            pool=pool,
            **options,
            files_for_tasks=self.files_for_tasks() if running else (),
            option_names=self._option_names,
        )

    def _environment(self, running: bool) -> Any:
        """The job's environment: the DAG author's, over the OpenLineage parent run's variables when running."""
        if not running or not self._lineage_environment or not isinstance(self.environment, (Mapping, type(None))):
            return self.environment
        return {**self._lineage_environment, **(self.environment or {})}

    # -- execution ------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        return self._submit_and_wait(context, quota_since=None)

    def execute_after_quota_wait(
        self, context: Context, event: dict[str, Any] | None = None, quota_since: float | None = None
    ) -> Any:
        """Resumed after waiting (in the triggerer) for the account to get below its quota: try again."""
        return self._submit_and_wait(context, quota_since=quota_since)

    def _submit_and_wait(self, context: Context, quota_since: float | None) -> Any:
        run = self.run
        self._lineage_environment = parent_environment(context)
        while True:
            try:
                # Both can meet a quota: creating a shared pool, creating the job.
                submission = run.prepare(self.job_request(running=True), TaskInstanceRef.of(context, self.task_id))
                attachment = run.attach(
                    submission,
                    remembered=remembered_job(context),
                    remember=lambda job_id: remember_job(context, job_id),
                )
                break
            except QuotaReachedError as exc:
                quota_since = self._wait_for_quota(exc, quota_since)
        job_id = attachment.job_id
        if run.killed:
            # Killed while submitting: the job may have been created after on_kill looked for it.
            run.end_killed_job(job_id)
            raise AirflowException(f"The task was killed while submitting Batch job {job_id}; the job was terminated")
        ti = context["ti"]
        ti.xcom_push(key=LINK_XCOM_KEY, value=link_data(self.hook, job_id, getattr(ti, "try_number", None)))
        watcher = run.watcher(run.watch_state(job_id, submission))
        if not attachment.finished:
            if self.deferrable:
                self._defer(context, watcher)
            run.wait(watcher, self.execution_timeout)
        return self._finish(context, watcher)

    def _wait_for_quota(self, exc: QuotaReachedError, quota_since: float | None) -> float:
        """Wait for the account to get below its quota; deferrable: in the triggerer (no worker slot held)."""
        delay, since = self.run.quota_delay(exc, quota_since)
        if self.deferrable:
            self.defer(
                # Not sooner than min_deferral_seconds: see AzureBatchJobTrigger._hold_for_the_scheduler.
                trigger=AzureBatchWaitTrigger(
                    time.time() + max(delay, config.get_float("min_deferral_seconds")), reason=exc.code
                ),
                method_name="execute_after_quota_wait",
                kwargs={"quota_since": since},
            )
        time.sleep(delay)
        return since

    def _defer(self, context: Context, watcher: JobWatcher) -> None:
        started = getattr(context["ti"], "start_date", None) or datetime.now(timezone.utc)
        deadline, timeout = deferral_deadline(started, self.execution_timeout)
        self.defer(trigger=self.run.trigger(watcher, deadline), method_name="execute_complete", timeout=timeout)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger: flush what it did not print, then report like the sync path."""
        event = event_in_full(event, context, self.task_id)
        watcher = self.run.resume(event, self.execution_timeout)
        if event is not None and event.get("status") == "fallback":
            self.run.fall_back(watcher, str(event.get("message")), self.job_request(running=True))
            # The next trigger may start from the last checkpoint (a restart): it must be this state, moved.
            context["ti"].xcom_push(key=CHECKPOINT_KEY, value=watcher.state.to_json())
            self._defer(context, watcher)
        return self._finish(context, watcher)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """The deferral ended without an event (Airflow's own deferral timeout, a trigger that crashed): the
        Batch job must not run on unwatched, so it is terminated before the task fails."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except (TaskDeferralTimeout, TaskDeferralError):
            job_id = self._job_of(context)
            if job_id is not None:
                self.run.terminate_unwatched(job_id)
            raise

    def _job_of(self, context: Context) -> str | None:
        """The job this task instance submitted (for a wait that ended without an event)."""
        job_id = remembered_job(context)
        if job_id is None:
            link = context["ti"].xcom_pull(task_ids=self.task_id, key=LINK_XCOM_KEY)
            job_id = link.get("job_id") if isinstance(link, dict) else None
        return job_id

    # -- the end --------------------------------------------------------------------------------------
    def _finish(self, context: Context, watcher: JobWatcher) -> Any:
        result = self.run.finish(watcher, Expectations.of(self.job_request()))
        if result.deleted:
            # The link now shows the account's jobs instead of a job that is gone.
            ti = context["ti"]
            link = {**link_data(self.hook, result.job_id, getattr(ti, "try_number", None)), "deleted": True}
            context["ti"].xcom_push(key=LINK_XCOM_KEY, value=link)
        self.lineage_result = result
        if result.succeeded:
            record_events(self, context, result)
        return self.outcome(result)

    def asset_results(self, result: RunResult) -> dict[str, Any] | None:
        """The tasks' result-file values an asset event carries (by Batch task id)."""
        results = result.xcom.get("results")
        return dict(results) if isinstance(results, dict) else None

    def outcome(self, result: RunResult) -> Any:
        """The run's result as Airflow's: the XCom value, or the exception that fails the task."""
        if result.failure is not None:
            self.fail_with(result.failure)
        if result.skipped is not None:
            raise AirflowSkipException(result.skipped)
        return result.xcom

    def fail_with(self, report: str) -> NoReturn:
        """Fail the task with the failure report: logged as the last line before Airflow's traceback (which
        readers meet first, above 25 lines of Airflow's own frames), and the exception's message (what
        callbacks, e-mails and the UI's failure summary show)."""
        self.lineage_failure = report
        self.log.error("%s", report)
        raise AirflowException(report)

    def on_kill(self) -> None:
        self.run.on_kill()

    # -- OpenLineage (called by the OpenLineage provider alone: nothing of it is imported otherwise) ----------
    def get_openlineage_facets_on_start(self) -> OperatorLineage[Any, Any]:
        from airflow_provider_azbatch.lineage.openlineage import facets

        return facets(self, "start")

    def get_openlineage_facets_on_complete(
        self, task_instance: RuntimeTaskInstanceProtocol
    ) -> OperatorLineage[Any, Any]:
        from airflow_provider_azbatch.lineage.openlineage import facets

        return facets(self, "complete")

    def get_openlineage_facets_on_failure(
        self, task_instance: RuntimeTaskInstanceProtocol
    ) -> OperatorLineage[Any, Any]:
        from airflow_provider_azbatch.lineage.openlineage import facets

        return facets(self, "failure")

"""``AzureBatchJobSensor``: wait for a Batch job submitted elsewhere (poke or deferrable)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowException
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.results.failure_report import failure_report
from airflow_provider_azbatch.results.outcomes import JobOutcomes
from airflow_provider_azbatch.submission import validation as check
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.factory import configured_watcher
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow.sdk import Context


class AzureBatchJobSensor(BaseSensorOperator):
    """Succeeds when every task of the job has finished (or the job ended), failing if any task failed.

    :param job_id: the Batch job to watch.
    :param azbatch_conn_id: the ``azbatch`` connection (default ``[azbatch] default_conn_id``).
    :param stream_output: show the first ``max_streamed_tasks`` tasks' output in the log (default off:
        the job is someone else's). Works in ``poke`` mode and deferrable, not with ``mode="reschedule"``.
    :param max_streamed_tasks: with ``stream_output``: how many tasks' output to show.
    :param fail_on_task_failure: fail when a task failed (default) or succeed once the job is over.
    :param failure_tail_lines: stderr lines quoted in the error for a failed task.
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
    :param max_outage: seconds of Batch service errors a deferred wait rides out before failing.
    """

    template_fields: Sequence[str] = ("job_id",)
    ui_color = "#cfe8fc"

    def __init__(
        self,
        *,
        job_id: str,
        azbatch_conn_id: str | None = None,
        stream_output: bool = False,
        max_streamed_tasks: int | None = None,
        fail_on_task_failure: bool = True,
        failure_tail_lines: int | None = None,
        deferrable: bool | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS,
        **kwargs: Any,
    ) -> None:
        from airflow_provider_azbatch.compat import conf

        kwargs.setdefault("poke_interval", config.get_float("poll_interval"))
        super().__init__(**kwargs)
        self.job_id = job_id
        self.azbatch_conn_id = azbatch_conn_id or config.get_str("default_conn_id")
        self.stream_output = stream_output
        self.max_streamed_tasks = check.integer(
            max_streamed_tasks if max_streamed_tasks is not None else config.get_int("max_streamed_tasks"),
            "max_streamed_tasks",
            minimum=0,
        )
        self.fail_on_task_failure = fail_on_task_failure
        self.failure_tail_lines = check.integer(
            failure_tail_lines if failure_tail_lines is not None else config.get_int("failure_tail_lines"),
            "failure_tail_lines",
            minimum=0,
        )
        self.deferrable = (
            deferrable if deferrable is not None else conf.getboolean("operators", "default_deferrable", fallback=False)
        )
        self.max_outage = check.number(max_outage, "max_outage")
        if stream_output and self.mode == "reschedule":
            raise check.fail(
                "stream_output",
                "needs the sensor to keep its place between pokes: use mode='poke' or deferrable=True with it, "
                "not mode='reschedule'",
            )
        self._watcher: JobWatcher | None = None

    @cached_property
    def hook(self) -> AzureBatchHook:
        return AzureBatchHook(self.azbatch_conn_id)

    def _new_state(self) -> WatchState:
        job = self.hook.get_job(self.job_id, select=["id", "metadata", "executionInfo"])
        if job is None:
            raise AirflowException(f"Batch job {self.job_id!r} does not exist in account '{self.hook.account_name}'")
        location = LogLocation.from_metadata(job.metadata)
        streamed: list[str] = []
        if self.stream_output and self.max_streamed_tasks:
            tasks = self.hook.list_tasks(self.job_id, select=["id"])
            streamed = [task.id for task in itertools.islice(tasks, self.max_streamed_tasks)]
        return WatchState(
            job_id=self.job_id,
            streamed=streamed,
            log_location=location.to_json() if location else None,
            pool_id=getattr(job.execution_info, "pool_id", None),
            pool_check_interval=config.get_float("pool_check_interval"),
        )

    def _watcher_for(self, state: WatchState) -> JobWatcher:
        return configured_watcher(state, self.log, stream_output=self.stream_output, poll_interval=self.poke_interval)

    def execute(self, context: Context) -> Any:
        if self.deferrable:
            self.defer(
                trigger=AzureBatchJobTrigger(
                    azbatch_conn_id=self.azbatch_conn_id,
                    watch_state=self._new_state().to_json(),
                    poll_interval=self.poke_interval,
                    stream_output=self.stream_output,
                    max_read_bytes=config.get_int("max_read_bytes"),
                    max_outage=self.max_outage,
                    terminate_on_kill=False,  # not our job to stop
                    deferred_at=time.time(),
                ),
                method_name="execute_complete",
            )
        return super().execute(context)

    def poke(self, context: Context) -> bool:
        if self._watcher is None:
            self._watcher = self._watcher_for(self._new_state())
        done = run_sync(self._watcher.step(time.time()), self.hook)
        if done:
            self._report(self._watcher.state.log_location)
        return bool(done)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> None:
        if not event or event.get("status") != "done":
            message = (event or {}).get("message") or f"Waiting for Batch job {self.job_id} ended with {event!r}"
            raise AirflowException(message)
        self._report((event.get("watch_state") or {}).get("log_location"))

    def _report(self, log_location: dict[str, str] | None) -> None:
        outcomes = JobOutcomes.collect(self.hook.list_task_outcomes(self.job_id))
        failed = outcomes.failed
        self.log.info("Batch job %s is over: %d of %d tasks failed", self.job_id, len(failed), outcomes.total)
        if failed and self.fail_on_task_failure:
            job = self.hook.get_job(self.job_id, select=["executionInfo"])
            reason = getattr(getattr(job, "execution_info", None), "termination_reason", None)
            only_failed = JobOutcomes(outcomes.listed, failed, outcomes.total)
            report = failure_report(
                self.job_id,
                only_failed,
                tail_lines=self.failure_tail_lines,
                terminate_reason=reason,
                log_location=log_location,
            )
            raise AirflowException(run_sync(report, self.hook))

"""``AzureBatchJobSensor``: wait for a Batch job submitted elsewhere (poke or deferrable).

The sensor is a face of a run (:mod:`airflow_provider_azbatch.runs`) that submits nothing and stops nothing:
it watches the job (poking, or in the triggerer) and reports how it ended.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowException
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.runs import RunSettings, event_in_full
from airflow_provider_azbatch.runs.face import RunFace
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS
from airflow_provider_azbatch.watching.output_log import log_emitter, show_event_lines
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow.sdk import Context


class AzureBatchJobSensor(BaseSensorOperator, RunFace):
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
        self.run_settings = RunSettings.from_parameters(
            azbatch_conn_id=azbatch_conn_id,
            poll_interval=self.poke_interval,
            stream_output=stream_output,
            max_streamed_tasks=max_streamed_tasks,
            failure_tail_lines=failure_tail_lines,
            max_outage=max_outage,
            operator=type(self).__name__,
        )
        self.fail_on_task_failure = fail_on_task_failure
        self.deferrable = (
            deferrable if deferrable is not None else conf.getboolean("operators", "default_deferrable", fallback=False)
        )
        if stream_output and self.mode == "reschedule":
            raise validation.fail(
                "stream_output",
                "needs the sensor to keep its place between pokes: use mode='poke' or deferrable=True with it, "
                "not mode='reschedule'",
            )
        self._watcher: JobWatcher | None = None

    def _new_state(self) -> WatchState:
        job = self.hook.get_job(
            self.job_id, select=["id", "metadata", "executionInfo", "jobPreparationTask", "jobReleaseTask"]
        )
        if job is None:
            raise AirflowException(f"Batch job {self.job_id!r} does not exist in account '{self.hook.account_name}'")
        location = LogLocation.from_metadata(job.metadata)
        streamed: list[str] = []
        settings = self.run_settings
        if settings.stream_output and settings.max_streamed_tasks:
            tasks = self.hook.list_tasks(self.job_id, select=["id"])
            streamed = [task.id for task in itertools.islice(tasks, settings.max_streamed_tasks)]
        preparation = getattr(job, "job_preparation_task", None)
        return WatchState(
            job_id=self.job_id,
            streamed=streamed,
            log_location=location.to_json() if location else None,
            pool_id=getattr(job.execution_info, "pool_id", None),
            pool_check_interval=config.get_float("pool_check_interval"),
            has_preparation=preparation is not None,
            waits_for_preparation=preparation is not None and preparation.wait_for_success is not False,
            has_release=getattr(job, "job_release_task", None) is not None,
        )

    def execute(self, context: Context) -> Any:
        if self.deferrable:
            watcher = self.run.watcher(self._new_state())
            # Not this sensor's job to stop when the sensor is killed.
            self.defer(trigger=self.run.trigger(watcher, terminate_on_kill=False), method_name="execute_complete")
        return super().execute(context)

    def poke(self, context: Context) -> bool:
        if self._watcher is None:
            self._watcher = self.run.watcher(self._new_state())
        done = run_sync(self._watcher.step(time.time()), self.hook)
        if done:
            self._report(self._watcher)
        return bool(done)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> None:
        event = event_in_full(event, context, self.task_id)
        if not event or event.get("status") != "done":
            message = (event or {}).get("message") or f"Waiting for Batch job {self.job_id} ended with {event!r}"
            raise AirflowException(message)
        show_event_lines(event, log_emitter(self.log))
        self._report(self.run.watcher(WatchState.from_json(event["watch_state"])))

    def _report(self, watcher: JobWatcher) -> None:
        result = self.run.report(watcher, unfinished_fail=False)
        self.log.info("Batch job %s is over: %d of %d tasks failed", self.job_id, result.failed, result.total)
        if result.failure is not None and self.fail_on_task_failure:
            raise AirflowException(result.failure)

"""One Batch job's life for one try of an Airflow task: submit or reattach, watch it (on the worker, or in the
triggerer), report how it ended, clean up; and the kill that stops it.

The operator, the TaskFlow decorator and the sensor are faces over this: they turn Airflow's calls
(``execute``, a deferral's resumption, ``on_kill``) into these steps and its results into Airflow's
(return value, exceptions, XCom), and copy none of it.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowException, AirflowTaskTimeout
from airflow_provider_azbatch.exceptions import AzureBatchValidationError, QuotaReachedError
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.hooks.errors import describe_error, is_auth_failure
from airflow_provider_azbatch.model.verdict import (
    AIRFLOW_DEFERRAL_ENDED,
    AIRFLOW_EXECUTION_TIMEOUT,
    AIRFLOW_TASK_KILLED,
    BLOCKED_REASONS,
    POOL_PROBLEM,
    SPOT_FALLBACK_FAILED,
)
from airflow_provider_azbatch.runs.forensics import KeptLogs, keep_node_logs
from airflow_provider_azbatch.runs.pre_submit import build_submission
from airflow_provider_azbatch.runs.results import Expectations, RunResult, collect_result
from airflow_provider_azbatch.runs.settings import RunSettings
from airflow_provider_azbatch.runs.spot_fallback import fall_back
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.job_ids import TaskInstanceRef
from airflow_provider_azbatch.submission.reattach import Attachment, submit_or_reattach
from airflow_provider_azbatch.submission.request import JobRequest
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.triggers.watch_events import unpack_result
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.factory import configured_watcher
from airflow_provider_azbatch.watching.outages import OutagePolicy, WaitFailed
from airflow_provider_azbatch.watching.output_log import log_emitter, show_event_lines
from airflow_provider_azbatch.watching.pool_health import PoolProblem
from airflow_provider_azbatch.watching.preemption import SpotFallbackDue
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_azbatch.compat import Log

# How long the wait loop lets on_kill's terminate request finish before it sends its own.
KILL_THREAD_WAIT_SECONDS = 30
# Rounds of reading left-over output after the trigger's event (each reads up to max_read_bytes per stream).
MAX_FLUSH_ROUNDS = 100


# The trigger's own timeout event fires this long before Airflow's deferral timeout would (measured worst
# case at 1,000 deferred jobs: a few seconds; see bench/).
TIMEOUT_PADDING = timedelta(seconds=60)


def deferral_deadline(started: datetime, execution_timeout: timedelta | None) -> tuple[float | None, timedelta | None]:
    """For a try started at ``started``: when the trigger's watch ends (epoch seconds), and Airflow's timeout of
    the deferral (later, so that the trigger ends the job first); None, None without an ``execution_timeout``."""
    if execution_timeout is None:
        return None, None
    end = started + execution_timeout
    return end.timestamp(), max(end - datetime.now(timezone.utc), timedelta(seconds=1)) + TIMEOUT_PADDING


def timed_out(job_id: str, execution_timeout: timedelta | None) -> str:
    return (
        f"Batch job {job_id} did not finish within execution_timeout ({execution_timeout}); "
        "the Batch job was terminated"
    )


def event_in_full(event: dict[str, Any] | None, context: Context, task_id: str) -> dict[str, Any] | None:
    """The trigger's event with what it left in XCom for the task (its ``result`` key: the watch's final
    state and last lines; see ``AzureBatchJobTrigger._small``), or carried packed, back in it."""
    if event and "packed" in event:  # no XCom for the trigger: the event carries them, packed
        full = {key: value for key, value in event.items() if key != "packed"}
        full.update(unpack_result(event["packed"]))
        return full
    if not event or "result" not in event or "watch_state" in event:
        return event
    ti = context["ti"]
    stored = ti.xcom_pull(task_ids=task_id, key=event["result"], map_indexes=ti.map_index)
    if not isinstance(stored, dict) or "watch_state" not in stored:
        raise AirflowException(
            f"The Batch trigger's result for job {event.get('job_id')} is missing from XCom {event['result']!r}"
        )
    full = {key: value for key, value in event.items() if key != "result"}
    full.update(stored)
    return full


class JobRun:
    """The life of the job of one try (see the module docstring)."""

    @classmethod
    def of(cls, settings: RunSettings, log: Log) -> JobRun:
        """The run of a face (the operator, the sensor) on its settings' connection."""
        return cls(AzureBatchHook(settings.azbatch_conn_id), settings, log)

    def __init__(self, hook: AzureBatchHook, settings: RunSettings, log: Log) -> None:
        self.hook = hook
        self.settings = settings
        self.log = log
        # The job this try submits or reattached to, known before it is created: a kill terminates it.
        self.job_id: str | None = None
        # What this try was asked to run (a fallback to dedicated nodes makes their pool from it).
        self.request: JobRequest | None = None
        self.killed = False
        self._kill_thread: threading.Thread | None = None

    # -- submit or reattach ---------------------------------------------------------------------------
    def prepare(self, request: JobRequest, where: TaskInstanceRef | None) -> JobSubmission:
        """Check everything and prepare (pool, storage access, registry, workspaces); nothing is submitted."""
        self.request = request
        with self._explained_failures():
            return build_submission(self.hook, request, where, self.log)

    def attach(
        self, submission: JobSubmission, *, remembered: str | None, remember: Callable[[str], None]
    ) -> Attachment:
        """Submit the job, or attach to the one an earlier try of this task instance submitted."""
        with self._explained_failures():
            return submit_or_reattach(
                self.hook,
                submission,
                remembered=remembered,
                remember=remember,
                force_new=self.settings.force_new_job,
                log=self.log,
                claim=self._claim,
                operator=self.settings.operator,
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
                f"Connection '{self.settings.azbatch_conn_id}'",
                f"was refused by the Batch account ({describe_error(exc)}): {hint}",
            ) from None

    def _claim(self, job_id: str) -> None:
        self.job_id = job_id

    def quota_delay(self, exc: QuotaReachedError, quota_since: float | None) -> tuple[float, float]:
        """(seconds to wait before trying again, when the quota was first met), within ``[azbatch]
        quota_wait_seconds``; raises once that is spent."""
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
        return delay, since

    # -- watch ----------------------------------------------------------------------------------------
    def watch_state(self, job_id: str, submission: JobSubmission) -> WatchState:
        specs = submission.tasks
        settings = self.settings
        return WatchState(
            job_id=job_id,
            expected_tasks=len(specs),
            streamed=[spec.id for spec in specs[: settings.max_streamed_tasks]] if settings.stream_output else [],
            pool_id=submission.pool_id,
            pool_check_interval=config.get_float("pool_check_interval"),
            log_location=submission.log_location.to_json() if submission.log_location else None,
            auto_pool_vm_size=str(submission.auto_pool["vmSize"]) if submission.auto_pool else None,
            has_preparation=submission.job_preparation is not None,
            waits_for_preparation=bool(submission.job_preparation and submission.job_preparation.wait_for_success),
            has_release=submission.job_release is not None,
            spot=copy.deepcopy(submission.spot),
        )

    def watcher(self, state: WatchState) -> JobWatcher:
        return configured_watcher(
            state, self.log, stream_output=self.settings.stream_output, poll_interval=self.settings.poll_interval
        )

    def wait(self, watcher: JobWatcher, execution_timeout: timedelta | None) -> None:
        """Watch on this worker until the job is over (a kill ends the job and the wait goes on to report it)."""
        job_id = watcher.state.job_id
        try:
            self._poll_until_over(watcher)
        except PoolProblem as problem:
            kept = self.keep_node_logs(problem.pool_id, problem.nodes)
            self.terminate(job_id, POOL_PROBLEM)
            raise AirflowException(self.cannot_run(job_id, str(problem), kept)) from None
        except AirflowTaskTimeout:
            self._terminate_for_timeout(job_id, execution_timeout)
            raise AirflowTaskTimeout(timed_out(job_id, execution_timeout)) from None

    def _poll_until_over(self, watcher: JobWatcher) -> None:
        policy = OutagePolicy(watcher.state.job_id, self.settings.max_outage)
        kill_handled = False
        while True:
            try:
                if run_sync(watcher.step(time.time()), self.hook):
                    return
                policy.succeeded()
                delay = self.settings.poll_interval
            except SpotFallbackDue as due:
                self.fall_back(watcher, str(due))
                continue
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
            if self.killed and not kill_handled:
                # Airflow lets execute() go on after on_kill: end the job here, then report it like any other.
                kill_handled = True
                self.end_killed_job(watcher.state.job_id)
                continue
            time.sleep(delay)

    def trigger(
        self, watcher: JobWatcher, deadline: float | None = None, *, terminate_on_kill: bool = True
    ) -> AzureBatchJobTrigger:
        """The trigger that watches in the triggerer instead (``deadline``: epoch seconds of the timeout;
        ``terminate_on_kill``: the job is this run's to stop)."""
        settings = self.settings
        return AzureBatchJobTrigger(
            azbatch_conn_id=settings.azbatch_conn_id,
            watch_state=watcher.state.to_json(),
            poll_interval=settings.poll_interval,
            deadline=deadline,
            stream_output=settings.stream_output,
            max_read_bytes=config.get_int("max_read_bytes"),
            max_outage=settings.max_outage,
            terminate_on_kill=terminate_on_kill,
            deferred_at=time.time(),
        )

    def resume(self, event: dict[str, Any] | None, execution_timeout: timedelta | None) -> JobWatcher:
        """Back from the trigger: show what it did not show yet; raise when the wait ended without the job."""
        if not event or "watch_state" not in event:
            raise AirflowException(f"The Batch trigger sent no usable event ({event!r})")
        show_event_lines(event, log_emitter(self.log))
        watcher = self.watcher(WatchState.from_json(event["watch_state"]))
        job_id = watcher.state.job_id
        self.job_id = job_id
        status = event.get("status")
        if status == "timeout":
            self._terminate_for_timeout(job_id, execution_timeout)
            self._flush(watcher)
            raise AirflowException(timed_out(job_id, execution_timeout))
        if status == "fallback":
            return watcher  # the caller falls back to dedicated nodes, then watches again
        if status == "error":
            if event.get("pool_problem"):
                at_fault = event.get("pool_problem_nodes") or {}
                kept = self.keep_node_logs(at_fault.get("pool_id"), at_fault.get("nodes") or ())
                self.terminate(job_id, POOL_PROBLEM)
                raise AirflowException(self.cannot_run(job_id, event["message"], kept))
            raise AirflowException(event.get("message") or f"Waiting for Batch job {job_id} failed")
        self._flush(watcher)
        return watcher

    def keep_node_logs(self, pool_id: str | None, nodes: tuple[str, ...] | list[str]) -> list[KeptLogs]:
        """The Batch service logs of the nodes the run failed on, uploaded before the job (and with it an auto
        pool) ends; never fails the run (see :mod:`.forensics`)."""
        if pool_id is None or not nodes:
            return []
        try:
            return keep_node_logs(self.hook, pool_id, list(nodes), self.log)
        except Exception as exc:
            self.log.warning("The Batch service logs of the pool's nodes were not kept: %s", describe_error(exc))
            return []

    @staticmethod
    def cannot_run(job_id: str, problem: str, kept: list[KeptLogs]) -> str:
        message = f"Batch job {job_id} cannot run: {problem}; the job was terminated"
        return "\n".join([message, *(item.describe() for item in kept)])

    def _flush(self, watcher: JobWatcher) -> None:
        """Print output the trigger had not printed yet (finished streams are skipped by their cursors)."""
        try:
            for _ in range(MAX_FLUSH_ROUNDS):
                run_sync(watcher.step(time.time()), self.hook)
                if not watcher.unfinished_output():
                    return
        except PoolProblem:
            return  # the job is over anyway; the report says what happened
        except Exception as exc:
            self.log.warning("Could not show the rest of the output: %s", describe_error(exc))

    def fall_back(self, watcher: JobWatcher, reason: str, request: JobRequest | None = None) -> None:
        """Move the job to dedicated nodes (see :mod:`.spot_fallback`); one that cannot is terminated, so that it
        does not go on unwatched on Spot nodes or disabled."""
        request = request or self.request
        job_id = watcher.state.job_id
        if request is None:
            raise AirflowException(f"Batch job {job_id} cannot fall back to dedicated nodes: the request is not known")
        try:
            fall_back(self.hook, request, watcher.state, reason, self.log)
        except Exception as exc:
            self.terminate(job_id, SPOT_FALLBACK_FAILED)
            raise AirflowException(
                f"Batch job {job_id} could not fall back to dedicated nodes ({describe_error(exc)}); the job was "
                "terminated"
            ) from exc

    # -- the end --------------------------------------------------------------------------------------
    def finish(self, watcher: JobWatcher, expectations: Expectations | None = None) -> RunResult:
        """How the job ended (summary, cost, failure report), then the clean-up ``on_finish_action`` asks for.

        A job whose remaining tasks can never run is terminated first, so that nothing of it holds on."""
        blocked = watcher.state.blocked
        if blocked is not None:
            self.terminate(watcher.state.job_id, BLOCKED_REASONS[blocked["reason"]])
        result = self.report(watcher, expectations=expectations)
        result.deleted = self.clean_up(result.job_id, succeeded=result.succeeded)
        return result

    def report(
        self, watcher: JobWatcher, *, unfinished_fail: bool = True, expectations: Expectations | None = None
    ) -> RunResult:
        """How the job ended (summary, cost, failure report), with no clean-up."""
        result = collect_result(
            self.hook,
            watcher,
            failure_tail_lines=self.settings.failure_tail_lines,
            log=self.log,
            unfinished_fail=unfinished_fail,
            expectations=expectations,
        )
        if result.skipped is not None:
            self.log.info("%s", result.skipped)
        return result

    def clean_up(self, job_id: str, *, succeeded: bool) -> bool:
        """Delete the job if ``on_finish_action`` says so; whether it was deleted."""
        action = self.settings.on_finish_action
        if action == "delete_job" or (action == "delete_succeeded_job" and succeeded):
            self.log.info("Deleting Batch job %s (on_finish_action=%s)", job_id, action)
            try:
                self.hook.delete_job(job_id)
            except Exception as exc:
                self.log.warning("Could not delete Batch job %s: %s", job_id, describe_error(exc))
                return False
            return True
        return False

    def terminate(self, job_id: str, reason: str) -> None:
        try:
            self.hook.terminate_job(job_id, reason=reason, wait=True)
        except Exception as exc:
            self.log.error("Could not terminate Batch job %s: %s", job_id, describe_error(exc))

    def _terminate_for_timeout(self, job_id: str, execution_timeout: timedelta | None) -> None:
        self.log.error("Batch job %s ran past execution_timeout (%s): terminating it", job_id, execution_timeout)
        self.terminate(job_id, AIRFLOW_EXECUTION_TIMEOUT)

    def terminate_unwatched(self, job_id: str) -> None:
        """The deferral ended without an event: the job must not run on unwatched."""
        self.log.error("The wait for Batch job %s ended without an event: terminating the job", job_id)
        self.terminate(job_id, AIRFLOW_DEFERRAL_ENDED)

    # -- kill -----------------------------------------------------------------------------------------
    def on_kill(self) -> None:
        # Airflow calls this from its SIGTERM handler, which may have interrupted this thread while it held a
        # log writer's lock (structlog's are not reentrant) or was inside the client's connection pool.
        # Logging or HTTP here could deadlock, so the handler only starts a thread; the wait loop sees
        # ``killed``, lets that thread finish and makes sure the job has ended.
        self.killed = True
        job_id = self.job_id
        if job_id is None or self._kill_thread is not None:
            return  # not submitted yet: the run terminates the job once the submission returns
        self._kill_thread = threading.Thread(
            target=self._terminate_on_kill, args=(job_id,), name="azbatch-on-kill", daemon=True
        )
        self._kill_thread.start()

    def _terminate_on_kill(self, job_id: str) -> None:
        self.log.info("Terminating Batch job %s (the Airflow task was killed)", job_id)
        try:
            self.hook.terminate_job(job_id, reason=AIRFLOW_TASK_KILLED, client=self.hook.new_client())
        except Exception as exc:  # the wait loop tries again; say what happened
            self.log.error("Could not terminate Batch job %s: %s", job_id, describe_error(exc))

    def end_killed_job(self, job_id: str) -> None:
        if self._kill_thread is not None:
            self._kill_thread.join(timeout=KILL_THREAD_WAIT_SECONDS)
        else:
            self.log.info("Terminating Batch job %s (the Airflow task was killed)", job_id)
        self.terminate(job_id, AIRFLOW_TASK_KILLED)  # a no-op when the job already ended; waits until it has

"""Submitting a job exactly once per try, and finding it again from a later try.

Job ids are ``<base>``, ``<base>-a2``, ``<base>-a3`` ... with ``<base>`` derived from DAG, task, run
and map index. A try looks at them in order (from the one its task instance remembered in Airflow's
task state store, when there is one) and reattaches to an active job, reports a job that already
succeeded, or submits the next id after jobs that failed. Two tries racing for one id meet at the
service (``JobExists``), and the loser reattaches to the winner's job.

The decisions follow Airflow 3.3's ``ResumableJobMixin``: the same state-store key convention
(``external_id_key``) and the same ``resumable_job.*`` metrics for each decision (fresh_submit,
reconnect_success, already_succeeded, terminal_resubmit).
Unlike the mixin, a crash between submitting and remembering loses nothing: the next try finds the job
by its deterministic id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_azbatch.compat import incr_metric
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.job_ids import attempt_job_id

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

ACTIVE_JOB_STATES = ("active", "disabling", "disabled", "enabling")
# The task state store key of the job a try watches (ResumableJobMixin's ``external_id_key``).
STATE_STORE_KEY = "azbatch_job_id"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attachment:
    job_id: str
    # The job already finished successfully: nothing to wait for, nothing to run again.
    finished: bool


def remembered_job(context: Context) -> str | None:
    store = context.get("task_state_store")
    if store is None:
        return None
    try:
        value = store.get(STATE_STORE_KEY)
    except Exception:  # an execution API without a task state store: ids alone suffice
        return None
    return value if isinstance(value, str) else None


def remember_job(context: Context, job_id: str) -> None:
    store = context.get("task_state_store")
    if store is None:
        return
    try:
        store.set(STATE_STORE_KEY, job_id)
    except Exception as exc:  # still safe: job ids are deterministic, a retry finds the job by scanning
        _log.warning("Could not remember Batch job %s in the task state store: %s", job_id, exc)


def attempt_of(job_id: str | None, base: str) -> int:
    """The attempt number of a remembered job id of this base (1 when unknown)."""
    if job_id is None or job_id == base:
        return 1
    head, _, number = job_id.rpartition("-a")
    if number.isdigit() and base.startswith(head):
        return int(number)
    return 1


def submit(hook: AzureBatchHook, submission: JobSubmission) -> bool:
    """Create the job and add its tasks, then let it end with its last task; True if created now.

    Safe to repeat: an existing job is left as it is and tasks already added count as added, so a crash
    anywhere in here is mended by calling it again (a retry of the Airflow task does).
    """
    tasks = submission.task_options()  # built first: what it refuses, it refuses before anything is created
    created: bool = hook.create_job(submission.job_options())
    if tasks:
        hook.add_tasks(submission.job_id, tasks)
    if submission.terminate_when_done:
        hook.close_job_when_done(submission.job_id)
    return created


def _metric(name: str, operator: str) -> None:
    incr_metric(f"resumable_job.{name}", tags={"operator": operator})


def submit_or_reattach(
    hook: AzureBatchHook,
    submission: JobSubmission,
    *,
    remembered: str | None,
    remember: Callable[[str], None],
    force_new: bool,
    log: Log,
    claim: Callable[[str], None] = lambda job_id: None,
    operator: str = "AzureBatchJobOperator",
) -> Attachment:
    """Submit ``submission`` (its ``job_id`` is the base id) or attach to the job an earlier try made.

    ``claim`` learns the job id before the job is created or added to, so that a kill arriving in the
    middle of a submission still knows which job to terminate.
    """
    base = submission.job_id
    attempt = attempt_of(remembered, base)
    if remembered:
        _metric("reconnect_attempt", operator)
    while True:
        job_id = base if attempt == 1 else attempt_job_id(base, attempt)
        job = hook.get_job(job_id, select=["id", "state", "executionInfo"])
        if job is None:
            submission.job_id = job_id
            log.info(
                "Submitting Batch job %s with %d task(s) to pool %s",
                job_id,
                len(submission.tasks),
                submission.pool_id or "(auto pool)",
            )
            _metric("fresh_submit", operator)
            claim(job_id)
            # A job found existing by create is ours as much as the winner's (a racing try made it, or this
            # very request whose reply was lost): every task is in it and it ends with them; watch it.
            submit(hook, submission)
            remember(job_id)
            return Attachment(job_id, finished=False)
        state = enum_value(job.state)
        if state in ACTIVE_JOB_STATES and not force_new:
            log.info(
                "Reattaching to Batch job %s (state %s) submitted by an earlier try",
                job_id,
                state,
            )
            _metric("reconnect_success", operator)
            submission.job_id = job_id
            claim(job_id)
            submit(hook, submission)  # adds any task a crashed try did not add yet
            remember(job_id)
            return Attachment(job_id, finished=False)
        if state == "completed" and not force_new and _all_succeeded(hook, job_id):
            log.info(
                "Batch job %s already finished successfully in an earlier try; not running it again",
                job_id,
            )
            _metric("already_succeeded", operator)
            return Attachment(job_id, finished=True)
        if state not in ACTIVE_JOB_STATES:
            log.info("Batch job %s is %s and did not succeed: submitting a new job", job_id, state)
            _metric("terminal_resubmit", operator)
        attempt += 1


def _all_succeeded(hook: AzureBatchHook, job_id: str) -> bool:
    counts = hook.get_task_counts(job_id)
    return bool(counts.failed == 0 and counts.active == 0 and counts.running == 0 and counts.completed > 0)

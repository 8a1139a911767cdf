"""The submission requests of :class:`~.batch.AzureBatchHook` (create a job or a pool, add tasks, set rules),
retried while the service or the network fail transiently; what a refused or failed step tells the user."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from azure.batch import BatchClient
from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch import config
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.exceptions import BatchRequestRefusedError, QuotaReachedError, SubmissionStepError
from airflow_provider_azbatch.hooks.errors import (
    QUOTA_CODES,
    describe_error,
    error_code,
    is_refused_request,
    is_transient,
    refusal_hint,
    retry_after_seconds,
)
from airflow_provider_azbatch.hooks.translate import counts_of
from airflow_provider_azbatch.retries import Backoff

T = TypeVar("T")
log = logging.getLogger("airflow_provider_azbatch.hooks.batch")


def raise_if_quota(exc: BaseException, account_name: str) -> None:
    """A 409 that says the account is at a quota (like ``JobExists``, told apart by its code)."""
    code = error_code(exc)
    if code in QUOTA_CODES:
        detail = describe_error(exc).removeprefix(f"{code}: ").rstrip(".")
        raise QuotaReachedError(code, QUOTA_CODES[code], account_name, detail) from None


def run_step(what: str, action: Callable[[], T], *, creates: bool, left_behind: Callable[[], str]) -> T:
    """Run an idempotent submission request, repeating it while the service or network fail transiently.

    azure-core already retries each request a few times (honouring ``Retry-After``); this waits out
    longer trouble, up to ``[azbatch] submit_retry_seconds``, then says which step failed and what
    state the job was left in (``left_behind``). A create request Batch refuses (400, e.g. a VM size it does not
    know) fails at once: the same request would be refused again, and nothing was created.
    """
    budget = config.get_float("submit_retry_seconds")
    started = time.monotonic()
    backoff = Backoff(initial=1.0, maximum=30.0)
    attempts = 0
    while True:
        attempts += 1
        try:
            return action()
        except Exception as exc:
            if creates and is_refused_request(exc):
                # A 400 is the same answer however often the request is sent, and nothing was created.
                raise BatchRequestRefusedError(
                    f"{what}: Batch refused the request, so nothing was created: {describe_error(exc)}"
                    f"{refusal_hint(exc)}"
                ) from None
            if not is_transient(exc):
                raise
            delay = backoff.next_delay(retry_after_seconds(exc))
            elapsed = time.monotonic() - started
            if elapsed + delay > budget:
                raise SubmissionStepError(
                    f"{what} failed {attempts} times over {elapsed:.0f} s ([azbatch] submit_retry_seconds = "
                    f"{budget:g}); last error: {describe_error(exc)}. {left_behind()}"
                ) from exc
            log.warning("%s: %s; trying again in %.1f s", what, describe_error(exc), delay)
            time.sleep(delay)


def job_progress(new_client: Callable[..., BatchClient], job_id: str | None) -> str:
    """What a half-done submission left behind, for the error message (best effort)."""
    if job_id is None:
        return ""
    try:
        client = new_client(retry_total=0)
        try:
            job = client.get_job(job_id, select=["id", "state"])
            counts = counts_of(client.get_job_task_counts(job_id))
        finally:
            client.close()
    except ResourceNotFoundError:
        return f"Batch job {job_id} does not exist: a retry of this Airflow task submits it."
    except Exception as exc:
        return f"The state of Batch job {job_id} could not be read ({describe_error(exc)})."
    total = counts.active + counts.running + counts.completed
    return (
        f"Batch job {job_id} is {enum_value(job.state)} with {total} task(s) added: a retry of this Airflow task "
        "reattaches to it and completes the submission."
    )

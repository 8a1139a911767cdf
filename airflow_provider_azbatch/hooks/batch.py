"""``AzureBatchHook``: one ``azbatch`` connection = one Batch account, sync and async clients."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from airflow.sdk import BaseHook
from azure.batch import BatchClient
from azure.batch import models as batch_models

# SDK 15.1.0 quirk: the options model is not exported, and an empty one makes the call fail
# before sending ("No value for given attribute"): always pass a reason.
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
)

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings, ConnectionConfigError
from airflow_provider_azbatch.hooks.credentials import build_credential, client_kwargs
from airflow_provider_azbatch.utils.job_spec import JobSubmission
from airflow_provider_azbatch.utils.job_watch import TaskCounts, enum_value

# azure-core logs every request and response at INFO; in a task log that drowns the task's output.
_HTTP_LOGGER = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
if _HTTP_LOGGER.level == logging.NOTSET:
    _HTTP_LOGGER.setLevel(logging.WARNING)

# Polling interval for the SDK's delete/terminate pollers (its default is 5 s).
LRO_POLL_SECONDS = 1


def describe_error(exc: BaseException) -> str:
    """``Code: message`` from a Batch error, without the RequestId/Time lines the service appends."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or getattr(exc, "message", None) or str(exc)
    first = str(message).split("\n")[0].strip()
    details = getattr(getattr(exc, "model", None), "error_values", None) or []
    extra = "; ".join(f"{d.key}={d.value}" for d in details if d.key != "AuthenticationErrorDetail")
    auth_detail = next((d.value for d in details if d.key == "AuthenticationErrorDetail"), None)
    text = f"{code}: {first}" if code else first
    if auth_detail:
        text += f" ({auth_detail})"
    if extra:
        text += f" [{extra}]"
    return text


class AzureBatchHook(BaseHook):
    """Talks to one Azure Batch account through an ``azbatch`` connection.

    :param azbatch_conn_id: the connection; default ``[azbatch] default_conn_id`` (``azbatch_default``).
    """

    conn_name_attr = "azbatch_conn_id"
    default_conn_name = "azbatch_default"
    conn_type = "azbatch"
    hook_name = "Azure Batch (azbatch)"

    def __init__(self, azbatch_conn_id: str | None = None) -> None:
        super().__init__()
        self.azbatch_conn_id = azbatch_conn_id or config.get_str("default_conn_id")

    # -- connection and clients -------------------------------------------------------------------------
    @cached_property
    def settings(self) -> BatchConnectionSettings:
        settings = BatchConnectionSettings.from_connection(self.get_connection(self.azbatch_conn_id))
        _mask(settings.secrets)
        return settings

    def get_conn(self) -> BatchClient:
        return self.client

    @cached_property
    def client(self) -> BatchClient:
        return self.new_client()

    def new_client(self, **overrides: Any) -> BatchClient:
        """A sync client with its own connection pool (``client`` is the hook's shared one)."""
        settings = self.settings
        return BatchClient(settings.account_url, build_credential(settings), **client_kwargs(settings), **overrides)

    def get_async_conn(self) -> Any:
        """A new ``azure.batch.aio.BatchClient``; close it (``async with``) when done."""
        from azure.batch.aio import BatchClient as AsyncBatchClient

        settings = self.settings
        return AsyncBatchClient(
            settings.account_url, build_credential(settings, asynchronous=True), **client_kwargs(settings)
        )

    @property
    def account_name(self) -> str:
        """The account name: the connection's login, else the first label of the account URL's host."""
        settings = self.settings
        if settings.account_name:
            return settings.account_name
        host = urlsplit(settings.account_url).hostname or ""
        return host if host.replace(".", "").isdigit() or ":" in host else host.split(".")[0]

    # -- jobs -----------------------------------------------------------------------------------------------
    def submit_job(self, submission: JobSubmission, *, max_concurrency: int = 4) -> bool:
        """Create the job and add its tasks; True if the job was created now, False if it existed.

        Safe to repeat: an existing job is left as it is and tasks already added count as added
        (``TaskExists``), so a crash anywhere in here is mended by calling it again.
        """
        created = True
        try:
            self.client.create_job(submission.job_options())
        except ResourceExistsError:
            created = False
        tasks = submission.task_options()
        if tasks:
            self.client.create_tasks(
                submission.job_id, tasks, max_concurrency=max_concurrency if len(tasks) > 100 else 0
            )
        if submission.terminate_when_done:
            # Set only now: a job told to end when all tasks are done could end between two batches.
            self.client.update_job(
                submission.job_id,
                batch_models.BatchJobUpdateOptions(
                    all_tasks_complete_mode=batch_models.BatchAllTasksCompleteMode.TERMINATE_JOB
                ),
            )
        return created

    def get_job(self, job_id: str, select: Sequence[str] | None = None) -> batch_models.BatchJob | None:
        try:
            return self.client.get_job(job_id, select=list(select) if select else None)
        except ResourceNotFoundError:
            return None

    def get_job_state(self, job_id: str) -> str | None:
        job = self.get_job(job_id, select=["state"])
        return enum_value(job.state) if job is not None else None

    def get_task_counts(self, job_id: str) -> TaskCounts:
        return TaskCounts.from_sdk(self.client.get_job_task_counts(job_id))

    def list_jobs(
        self, filter: str | None = None, select: Sequence[str] | None = None
    ) -> Iterator[batch_models.BatchJob]:
        return iter(self.client.list_jobs(filter=filter, select=list(select) if select else None))

    def describe_job(self, job_id: str) -> dict[str, Any]:
        """The job as the service returns it, plus its task counts."""
        job = self.client.get_job(job_id)
        description = job.as_dict()
        description["taskCounts"] = self.get_task_counts(job_id).to_json()
        return description

    def terminate_job(
        self, job_id: str, reason: str = "UserTerminate", *, wait: bool = False, client: BatchClient | None = None
    ) -> bool:
        """Terminate the job (running tasks are killed). False if it had already ended or is gone."""
        try:
            poller = (client or self.client).begin_terminate_job(
                job_id, BatchJobTerminateOptions(termination_reason=reason), polling_interval=LRO_POLL_SECONDS
            )
        except ResourceNotFoundError:
            return False
        except HttpResponseError as exc:
            if exc.error is not None and exc.error.code in ("JobCompleted", "JobBeingDeleted"):
                return False
            raise
        if wait:
            poller.result()
        return True

    def delete_job(self, job_id: str, *, wait: bool = False) -> bool:
        try:
            poller = self.client.begin_delete_job(job_id, polling_interval=LRO_POLL_SECONDS)
        except ResourceNotFoundError:
            return False
        if wait:
            poller.result()
        return True

    # -- tasks ----------------------------------------------------------------------------------------------
    def list_tasks(
        self, job_id: str, filter: str | None = None, select: Sequence[str] | None = None
    ) -> Iterator[batch_models.BatchTask]:
        return iter(self.client.list_tasks(job_id, filter=filter, select=list(select) if select else None))

    def describe_task(self, job_id: str, task_id: str) -> dict[str, Any]:
        return self.client.get_task(job_id, task_id).as_dict()

    def read_task_file(
        self, job_id: str, task_id: str, file_path: str, offset: int = 0, length: int | None = None
    ) -> bytes:
        """Bytes of a task file from ``offset`` (to the end, or ``length`` bytes), with a ranged read."""
        size = self.client.get_task_file_properties(job_id, task_id, file_path).content_length or 0
        end = size - 1 if length is None else min(size - 1, offset + length - 1)
        if end < offset:
            return b""
        return b"".join(self.client.download_task_file(job_id, task_id, file_path, ocp_range=f"bytes={offset}-{end}"))

    def subtask_outputs(self, job_id: str, task_id: str, file_name: str = "stdout.txt") -> dict[int, bytes]:
        """Output of each subtask of a multi-node task (read from the subtask's node), by subtask id."""
        outputs: dict[int, bytes] = {}
        for subtask in self.client.list_subtasks(job_id, task_id):
            info = subtask.node_info
            if info is None or not info.task_root_directory:
                continue
            path = f"{info.task_root_directory.rstrip('/')}/{file_name}"
            try:
                outputs[subtask.id] = b"".join(self.client.download_node_file(info.pool_id, info.node_id, path))
            except ResourceNotFoundError:
                continue
        return outputs

    # -- pools ----------------------------------------------------------------------------------------------
    def pool_exists(self, pool_id: str) -> bool:
        # SDK 15.1.0 quirk: pool_exists raises on 404 instead of returning False.
        try:
            return bool(self.client.pool_exists(pool_id))
        except ResourceNotFoundError:
            return False

    def create_pool_if_missing(self, pool: batch_models.BatchPoolCreateOptions) -> bool:
        """Create the pool unless a pool with its id exists; True if this call created it."""
        if self.pool_exists(pool.id):
            return False
        try:
            self.client.create_pool(pool)
        except ResourceExistsError:  # created concurrently by someone else: that is fine
            return False
        return True

    def ensure_shared_pool(self, pool_id: str, body: dict[str, Any]) -> bool:
        """Create the named pool from ``body`` (REST pool fields) unless it exists; True if created now.

        Safe to race: when two tasks create it at once, one wins and the other finds it. An existing pool
        must match ``body`` (VM size, image, slots, containers, scaling); a different one is an error
        that names the differences, never silently reused.
        """
        from airflow_provider_azbatch.utils.pool_strategy import PoolStrategyError, pool_differences

        try:
            self.client.create_pool(batch_models.BatchPoolCreateOptions({"id": pool_id, **body}))
            return True
        except ResourceExistsError:
            pass
        existing = self.client.get_pool(pool_id)
        if enum_value(existing.state) == "deleting":
            raise PoolStrategyError(f"pool {pool_id!r} is being deleted: wait for it to go, or use another pool id")
        differences = pool_differences(existing.as_dict(), body)
        if differences:
            raise PoolStrategyError(
                f"pool {pool_id!r} already exists with a different specification: {'; '.join(differences)}. "
                "Use another pool id, or delete the pool so that it is created again"
            )
        return False

    def get_pool(self, pool_id: str) -> batch_models.BatchPool | None:
        try:
            return self.client.get_pool(pool_id)
        except ResourceNotFoundError:
            return None

    # -- Blob storage -----------------------------------------------------------------------------------
    def blob_storage(self, needed_for: str) -> Any:
        """The connection's storage account (for task inputs, outputs and logs)."""
        from airflow_provider_azbatch.hooks.storage import BlobStorage

        return BlobStorage.from_settings(self.settings, needed_for)

    def log_reader(self, log_location: dict[str, str] | None) -> Any:
        """Reads task logs uploaded to Blob, for when their node is gone (None without upload)."""
        from airflow_provider_azbatch.hooks.storage import BlobLogReader, LogLocation

        location = LogLocation.from_json(log_location)
        if location is None:
            return None
        return BlobLogReader(self.blob_storage("Reading uploaded task logs"), location)

    # -- connection test (Airflow UI / ``airflow connections test``) ---------------------------------------
    def test_connection(self) -> tuple[bool, str]:
        try:
            settings = self.settings
        except ConnectionConfigError as exc:
            return False, str(exc)
        client = self.new_client(retry_total=0)
        try:
            next(iter(client.list_jobs(max_results=1)), None)
        except ServiceRequestError as exc:
            return False, f"Cannot reach {settings.account_url}: {_root_cause(exc)}"
        except ClientAuthenticationError as exc:
            return False, f"Authentication failed for {settings.account_url}: {describe_error(exc)}"
        except HttpResponseError as exc:
            if exc.error is not None and exc.error.code == "AuthenticationFailed":
                return False, f"AuthenticationFailed: {describe_error(exc).split(': ', 1)[1]}"
            return False, f"The Batch service answered {exc.status_code}: {describe_error(exc)}"
        finally:
            client.close()
        method = settings.auth_method.value
        return True, f"Connected to Batch account '{self.account_name}' at {settings.account_url} ({method})"


def _root_cause(exc: BaseException) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    return str(cause).split("\n")[0] or type(cause).__name__


def _mask(secrets: list[str]) -> None:
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover
        return
    for secret in secrets:
        mask_secret(secret)

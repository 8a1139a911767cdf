"""``AzureBatchHook``: one ``azbatch`` connection = one Batch account; every synchronous Batch request.

Besides the usual CRUD, the hook answers the reads a watch step is built from
(:class:`~airflow_provider_azbatch.model.reads.BatchReads`), and makes the submission requests
(create job, add tasks, close the job, create a pool) idempotent and retried: with this provider's
deterministic job ids they are safe to repeat, so a dropped connection or a 5xx costs a retry, not a
failed task or a job left half submitted.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

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

from airflow_provider_azbatch.compat import AirflowNotFoundException
from airflow_provider_azbatch.exceptions import SubmissionStepError
from airflow_provider_azbatch.hooks import batch_reads as reads
from airflow_provider_azbatch.hooks import pool_moves, submission_steps
from airflow_provider_azbatch.hooks.connection import (
    AzbatchHookBase,
    BatchConnectionSettings,
    ConnectionConfigError,
    ConnectionNotDefinedError,
    load_settings,
)
from airflow_provider_azbatch.hooks.credentials import build_credential, client_kwargs
from airflow_provider_azbatch.hooks.errors import (
    describe_batch_error,
    describe_error,
    error_code,
    root_cause,
)
from airflow_provider_azbatch.hooks.pool_moves import LRO_POLL_SECONDS, RETRY_ALL_METHODS
from airflow_provider_azbatch.hooks.storage import BlobStorage
from airflow_provider_azbatch.hooks.translate import (
    OUTCOME_SELECT,
)
from airflow_provider_azbatch.model.outcomes import TaskOutcome
from airflow_provider_azbatch.model.records import (
    ActiveTask,
    FailedTask,
    FileChunk,
    FileEnd,
    FileInfo,
    JobStatus,
    NodeTimes,
    SideTaskRun,
    TaskAttempt,
    TaskCounts,
)

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.credentials import BatchCredential

# azure-core logs every request and response at INFO; in a task log that drowns the task's output.
_HTTP_LOGGER = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
if _HTTP_LOGGER.level == logging.NOTSET:
    _HTTP_LOGGER.setLevel(logging.WARNING)

# 409s of requests to a job that has ended (or is ending).
JOB_ENDED_CODES = ("JobCompleted", "JobBeingDeleted", "JobBeingTerminated", "JobNotActive")

T = TypeVar("T")
log = logging.getLogger(__name__)


class AzureBatchHook(AzbatchHookBase):
    """Talks to one Azure Batch account through an ``azbatch`` connection.

    :param azbatch_conn_id: the connection; default ``[azbatch] default_conn_id`` (``azbatch_default``).
    """

    # -- connection and client ----------------------------------------------------------------------
    @cached_property
    def settings(self) -> BatchConnectionSettings:
        try:
            conn = self.get_connection(self.azbatch_conn_id)
        except AirflowNotFoundException:
            raise ConnectionNotDefinedError(self.azbatch_conn_id) from None
        return load_settings(conn)

    def get_conn(self) -> BatchClient:
        return self.client

    @cached_property
    def client(self) -> BatchClient:
        return self.new_client()

    def new_client(self, credential: BatchCredential | None = None, **overrides: Any) -> BatchClient:
        """A client with its own connection pool (``client`` is the hook's shared one), with ``credential`` if given
        (one built from the connection, shared by several clients) or a new one."""
        settings = self.settings
        credential = credential if credential is not None else build_credential(settings)
        return BatchClient(settings.account_url, credential, **client_kwargs(settings), **overrides)

    @property
    def account_name(self) -> str:
        """The account name: the connection's login, else the first label of the account URL's host."""
        settings = self.settings
        if settings.account_name:
            return settings.account_name
        host = urlsplit(settings.account_url).hostname or ""
        return host if host.replace(".", "").isdigit() or ":" in host else host.split(".")[0]

    # -- read primitives of a watch step (written once, for both hooks: .batch_reads) -----------------
    def get_task_counts(self, job_id: str) -> TaskCounts:
        return self._read(reads.task_counts(job_id))

    def get_job_status(self, job_id: str) -> JobStatus | None:
        return self._read(reads.job_status(job_id))

    def list_task_states(self, job_id: str, task_ids: Sequence[str]) -> dict[str, str]:
        return self._read(reads.task_states(job_id, task_ids))

    def list_task_attempts(self, job_id: str, task_ids: Sequence[str] | None = None) -> dict[str, TaskAttempt]:
        """The latest attempt of the tasks named, or of the running ones (at most ``MAX_ATTEMPTS_LISTED``)."""
        return self._read(reads.task_attempts(job_id, task_ids))

    def list_task_files(self, job_id: str, task_id: str) -> dict[str, FileInfo] | None:
        """The files at the root of the task's directory (stdout.txt, stderr.txt...); None once its node is gone."""
        return self._read(reads.task_files(job_id, task_id))

    def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None:
        """Bytes ``start..end`` (inclusive) of a task file; None if it is gone."""
        return self._read(reads.task_file(job_id, task_id, path, start, end))

    def read_task_file_from(self, job_id: str, task_id: str, path: str, start: int, end: int) -> FileChunk | None:
        """Bytes ``start..end`` of a task file with its creation time; None if it is gone, no bytes (416) if it
        ends before ``start``."""
        return self._read(reads.task_file_from(job_id, task_id, path, start, end))

    def read_task_file_tail(self, job_id: str, task_id: str, path: str, max_bytes: int) -> FileEnd | None:
        return self._read(reads.task_file_tail(job_id, task_id, path, max_bytes))

    def get_uploaded_log_size(self, location: dict[str, str], job_id: str, task_id: str, name: str) -> int | None:
        return self._read(reads.uploaded_log_size(location, job_id, task_id, name))

    def read_uploaded_log(
        self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
    ) -> bytes:
        return self._read(reads.uploaded_log(location, job_id, task_id, name, start, end))

    def get_pool_snapshot(self, pool_id: str) -> batch_models.BatchPool | None:
        snapshot: batch_models.BatchPool | None = self._read(reads.pool_snapshot(pool_id))
        return snapshot

    def list_nodes_in_states(self, pool_id: str, states: Sequence[str]) -> list[batch_models.BatchNode]:
        return self._read(reads.nodes_in_states(pool_id, states))

    def read_node_file_tail(self, pool_id: str, node_id: str, path: str, max_bytes: int) -> FileEnd | None:
        return self._read(reads.node_file_tail(pool_id, node_id, path, max_bytes))

    def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None:
        """The pool's nodes with when each was allocated; None once the pool is gone."""
        return self._read(reads.pool_nodes(pool_id))

    def list_active_dependencies(self, job_id: str) -> list[ActiveTask]:
        """The job's active tasks with what they depend on."""
        return self._read(reads.active_dependencies(job_id))

    def list_failed_tasks(self, job_id: str) -> list[FailedTask]:
        """The job's tasks that completed with a failure, with their exit conditions."""
        return self._read(reads.failed_tasks(job_id))

    def list_preparation_status(self, job_id: str) -> list[SideTaskRun]:
        """Every run of the job's preparation and release tasks, one per node and kind."""
        return self._read(reads.preparation_status(job_id))

    def _read(self, read: reads.Read[T]) -> T:
        return reads.drive(read, self._answer)

    def _answer(self, request: reads.Request) -> Any:
        if isinstance(request, reads.Get):
            # Streamed, then read: the pipeline would otherwise decode the body by its type, and fail on a file's.
            response = self.client.send_request(reads.http_request(request), stream=True)
            response.read()
            reads.raise_for_status(response)
            return response
        if isinstance(request, reads.Blob):
            storage = self.blob_storage("Uploaded task logs")
            if request.span is None:
                return storage.blob_size(request.container, request.blob)
            return storage.read_blob(request.container, request.blob, *request.span)
        answer = getattr(self.client, request.method)(*request.args, **request.kwargs)
        if isinstance(request, reads.Listing):
            return list(itertools.islice(answer, request.limit))
        if isinstance(request, reads.Download):
            return b"".join(answer)
        return answer

    # -- jobs ---------------------------------------------------------------------------------------
    def get_job(self, job_id: str, select: Sequence[str] | None = None) -> batch_models.BatchJob | None:
        answer: batch_models.BatchJob | None = self._read(reads.found(_selected("get_job", select, job_id)))
        return answer

    def list_jobs(
        self, filter: str | None = None, select: Sequence[str] | None = None
    ) -> Iterator[batch_models.BatchJob]:
        return iter(self.client.list_jobs(filter=filter, select=list(select) if select else None))

    def list_tasks(
        self, job_id: str, filter: str | None = None, select: Sequence[str] | None = None
    ) -> Iterator[batch_models.BatchTask]:
        return iter(self.client.list_tasks(job_id, filter=filter, select=list(select) if select else None))

    def list_task_outcomes(self, job_id: str) -> Iterator[TaskOutcome]:
        """How every task of the job ended (or where it is), ordered by task id."""
        return (TaskOutcome.from_sdk(task) for task in self.client.list_tasks(job_id, select=OUTCOME_SELECT))

    def create_job(self, job: batch_models.BatchJobCreateOptions) -> bool:
        """Create the job; False if it exists already (made by an earlier try, or by this call's lost reply).

        Raises :class:`~airflow_provider_azbatch.exceptions.QuotaReachedError` when the account is at its
        active job quota (a 409 like ``JobExists``, told apart by its code).
        """

        def create() -> bool:
            try:
                self.client.create_job(job, retry_on_methods=RETRY_ALL_METHODS)
            except ResourceExistsError as exc:
                self._raise_if_quota(exc)
                return False
            return True

        return self._submission_step(f"Creating Batch job {job.id}", job.id, create, creates=True)

    def add_tasks(self, job_id: str, tasks: Sequence[batch_models.BatchTaskCreateOptions]) -> None:
        """Add the tasks (in collections of 100, concurrently); tasks added before count as added."""
        from azure.batch.models import CreateTasksError

        concurrency = 8 if len(tasks) > 100 else 0

        def add() -> None:
            try:
                self.client.create_tasks(
                    job_id, list(tasks), max_concurrency=concurrency, retry_on_methods=RETRY_ALL_METHODS
                )
            except CreateTasksError as exc:
                if exc.failure_tasks:
                    first = exc.failure_tasks[0]
                    problem = describe_batch_error(first.error) if first.error is not None else "rejected"
                    raise SubmissionStepError(
                        f"Batch job {job_id}: the service refused task {first.task_id!r}: {problem}"
                        + (f" (and {len(exc.failure_tasks) - 1} more tasks)" if len(exc.failure_tasks) > 1 else "")
                    ) from None
                # Unknown outcomes (dropped connections, timeouts): the whole add is safe to repeat.
                if exc.errors:
                    raise exc.errors[0] from exc
                raise

        self._submission_step(f"Adding {len(tasks)} task(s) to Batch job {job_id}", job_id, add)

    def close_job_when_done(self, job_id: str) -> None:
        """Let the service terminate the job once all its tasks completed (set after every task is added)."""
        options = batch_models.BatchJobUpdateOptions(
            all_tasks_complete_mode=batch_models.BatchAllTasksCompleteMode.TERMINATE_JOB
        )

        def update() -> None:
            try:
                self.client.update_job(job_id, options, retry_on_methods=RETRY_ALL_METHODS)
            except ResourceExistsError as exc:
                # The job has ended already: by this very rule when a repeated request follows one whose reply was
                # lost after its tasks finished, or from outside. Either way there is nothing left to set.
                if error_code(exc) not in JOB_ENDED_CODES:
                    raise

        self._submission_step(f"Setting the completion rule of Batch job {job_id}", job_id, update)

    def terminate_job(
        self, job_id: str, reason: str = "UserTerminate", *, wait: bool = False, client: BatchClient | None = None
    ) -> bool:
        """Terminate the job (running tasks are killed). False if it had already ended or is gone."""
        try:
            poller = (client or self.client).begin_terminate_job(
                job_id, BatchJobTerminateOptions(termination_reason=reason), polling_interval=LRO_POLL_SECONDS
            )
        except HttpResponseError as exc:
            if job_ended(exc):
                return False
            raise
        if wait:
            poller.result()
        return True

    def delete_pool(self, pool_id: str, *, wait: bool = False) -> bool:
        """Delete the pool (its nodes are released); False if there is no such pool."""
        return _deleted(lambda: self.client.begin_delete_pool(pool_id, polling_interval=LRO_POLL_SECONDS), wait)

    def delete_job(self, job_id: str, *, wait: bool = False) -> bool:
        return _deleted(lambda: self.client.begin_delete_job(job_id, polling_interval=LRO_POLL_SECONDS), wait)

    def subtask_outputs(self, job_id: str, task_id: str, file_name: str = "stdout.txt") -> dict[int, bytes]:
        """Output of each subtask of a multi-node task (read from the subtask's node), by subtask id."""
        outputs: dict[int, bytes] = {}
        for subtask in self.client.list_subtasks(job_id, task_id):
            info = subtask.node_info
            if info is None or not info.task_root_directory or subtask.id is None:
                continue
            path = f"{info.task_root_directory.rstrip('/')}/{file_name}"
            try:
                data = self.client.download_node_file(info.pool_id or "", info.node_id or "", path)
                outputs[subtask.id] = b"".join(data)
            except ResourceNotFoundError:
                continue
        return outputs

    # -- pools --------------------------------------------------------------------------------------
    def get_pool(self, pool_id: str, select: Sequence[str] | None = None) -> batch_models.BatchPool | None:
        answer: batch_models.BatchPool | None = self._read(reads.found(_selected("get_pool", select, pool_id)))
        return answer

    def create_pool(self, pool_id: str, body: dict[str, Any]) -> bool:
        """Create the pool from ``body`` (REST pool fields); False if a pool with this id exists."""

        def create() -> bool:
            try:
                self.client.create_pool(
                    batch_models.BatchPoolCreateOptions({"id": pool_id, **body}), retry_on_methods=RETRY_ALL_METHODS
                )
            except ResourceExistsError as exc:
                self._raise_if_quota(exc)
                return False
            return True

        return self._submission_step(f"Creating pool {pool_id}", None, create, creates=True)

    def set_pool_formula(self, pool_id: str, formula: str, metadata: Sequence[tuple[str, str]]) -> None:
        """Give an autoscaled pool another formula (evaluated at once), then its metadata (replacing what it had)."""

        def update() -> None:
            self.client.enable_pool_auto_scale(
                pool_id,
                batch_models.BatchPoolEnableAutoScaleOptions(auto_scale_formula=formula),
                retry_on_methods=RETRY_ALL_METHODS,
            )
            items = [batch_models.BatchMetadataItem(name=name, value=value) for name, value in metadata]
            self.client.update_pool(
                pool_id, batch_models.BatchPoolUpdateOptions(metadata=items), retry_on_methods=RETRY_ALL_METHODS
            )

        self._submission_step(f"Updating the autoscale formula of pool {pool_id}", None, update)

    def move_job_to_pool(self, job_id: str, pool_id: str) -> None:
        """Run the job's remaining tasks on another pool (see :func:`.pool_moves.move_job_to_pool`)."""
        pool_moves.move_job_to_pool(self.client, job_id, pool_id, self.get_job_status)

    def retarget_pool(self, pool_id: str, *, formula: str | None = None, dedicated_nodes: int = 0) -> None:
        """Turn a pool to dedicated nodes (see :func:`.pool_moves.retarget_pool`)."""
        pool_moves.retarget_pool(self.client, pool_id, formula=formula, dedicated_nodes=dedicated_nodes)

    # -- Blob storage -------------------------------------------------------------------------------
    def blob_storage(self, needed_for: str) -> BlobStorage:
        """The connection's storage account (for task inputs, outputs and logs)."""
        return BlobStorage.from_settings(self.settings, needed_for, owner=self)

    # -- retried submission requests (.submission_steps) ---------------------------------------------------
    def _raise_if_quota(self, exc: BaseException) -> None:
        submission_steps.raise_if_quota(exc, self.account_name)

    def _submission_step(self, what: str, job_id: str | None, action: Callable[[], T], *, creates: bool = False) -> T:
        """Run an idempotent submission request, repeating it while the service or network fail transiently
        (see :func:`.submission_steps.run_step`)."""
        return submission_steps.run_step(
            what, action, creates=creates, left_behind=lambda: submission_steps.job_progress(self.new_client, job_id)
        )

    # -- connection test (Airflow UI / ``airflow connections test``) ------------------------------------
    def test_connection(self) -> tuple[bool, str]:
        try:
            settings = self.settings
        except ConnectionConfigError as exc:
            # Airflow tests a copy of the connection under a random id: naming it would only confuse.
            return False, f"{exc.field_name} {exc.problem}"
        client = self.new_client(retry_total=0)
        try:
            next(iter(client.list_jobs(max_results=1)), None)
        except ServiceRequestError as exc:
            return False, f"Cannot reach {settings.account_url}: {root_cause(exc)}"
        except ClientAuthenticationError as exc:
            return False, f"Authentication failed for {settings.account_url}: {describe_error(exc)}"
        except HttpResponseError as exc:
            if error_code(exc) == "AuthenticationFailed":
                return False, f"AuthenticationFailed: {describe_error(exc).split(': ', 1)[1]}"
            return False, f"The Batch service answered {exc.status_code}: {describe_error(exc)}"
        finally:
            client.close()
        method = settings.auth_method.value
        return True, f"Connected to Batch account '{self.account_name}' at {settings.account_url} ({method})"

    # -- for the command line ----------------------------------------------------------------------------
    @classmethod
    def for_command_line(cls, conn_id: str | None = None) -> AzureBatchHook:
        """A hook on a connection read the way Airflow's own commands read one.

        A task's hook asks the execution API; ``airflow azbatch ...`` runs outside any task, where the
        task SDK would only see environment variables and secrets backends. Airflow's core lookup also
        reads the metadata DB, so connections made in the UI or with ``airflow connections add`` work.
        """
        from airflow.models.connection import Connection

        hook = cls(conn_id)
        try:
            conn = Connection.get_connection_from_secrets(hook.azbatch_conn_id)
        except AirflowNotFoundException:
            raise ConnectionNotDefinedError(hook.azbatch_conn_id) from None
        hook.__dict__["settings"] = load_settings(conn)
        return hook

    def get_task(self, job_id: str, task_id: str, select: Sequence[str] | None = None) -> batch_models.BatchTask | None:
        answer: batch_models.BatchTask | None = self._read(reads.found(_selected("get_task", select, job_id, task_id)))
        return answer

    def list_subtasks(self, job_id: str, task_id: str) -> list[batch_models.BatchSubtask]:
        """The other instances of a multi-node task (empty for an ordinary task)."""
        return list(self.client.list_subtasks(job_id, task_id))

    def list_pools(
        self, filter: str | None = None, select: Sequence[str] | None = None
    ) -> Iterator[batch_models.BatchPool]:
        return iter(self.client.list_pools(filter=filter, select=list(select) if select else None))

    def list_nodes(self, pool_id: str, select: Sequence[str] | None = None) -> list[batch_models.BatchNode]:
        return list(self.client.list_nodes(pool_id, select=list(select) if select else None))

    def get_node(
        self, pool_id: str, node_id: str, select: Sequence[str] | None = None
    ) -> batch_models.BatchNode | None:
        answer: batch_models.BatchNode | None = self._read(reads.found(_selected("get_node", select, pool_id, node_id)))
        return answer

    def upload_node_logs(
        self, pool_id: str, node_id: str, container_url: str, start_time: datetime, end_time: datetime | None = None
    ) -> batch_models.UploadBatchServiceLogsResult:
        """Have Batch upload the node's service (agent) logs written since ``start_time`` into the container
        (``container_url``: a SAS URL that can create and write blobs); it names the folder and the file count."""
        options = batch_models.UploadBatchServiceLogsOptions(
            container_url=container_url, start_time=start_time, end_time=end_time
        )
        return self.client.upload_node_logs(pool_id, node_id, options)

    def list_pool_node_counts(self) -> dict[str, batch_models.BatchPoolNodeCounts]:
        """Nodes of every pool of the account by state (one request for all pools), by pool id."""
        return {counts.pool_id: counts for counts in self.client.list_pool_node_counts() if counts.pool_id}


def _deleted(begin: Callable[[], Any], wait: bool) -> bool:
    """Start a delete (and with ``wait``, wait for it); False if there was nothing to delete."""
    try:
        poller = begin()
    except ResourceNotFoundError:
        return False
    if wait:
        poller.result()
    return True


def job_ended(exc: HttpResponseError) -> bool:
    """The job a request was for is gone, or has ended (or is ending)."""
    return isinstance(exc, ResourceNotFoundError) or error_code(exc) in JOB_ENDED_CODES


def _selected(method: str, select: Sequence[str] | None, *args: str) -> reads.Call:
    """A get of the client with the fields ``select`` names (all when none)."""
    return reads.Call(method, args, {"select": list(select) if select else None})

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
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlsplit

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
from azure.core.rest import HttpRequest

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowNotFoundException, BaseHook
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.exceptions import BatchRequestRefusedError, QuotaReachedError, SubmissionStepError
from airflow_provider_azbatch.hooks.connection import (
    BatchConnectionSettings,
    ConnectionConfigError,
    ConnectionNotDefinedError,
    load_settings,
)
from airflow_provider_azbatch.hooks.credentials import BATCH_API_VERSION, build_credential, client_kwargs
from airflow_provider_azbatch.hooks.errors import (
    QUOTA_CODES,
    describe_batch_error,
    describe_error,
    error_code,
    is_refused_request,
    is_transient,
    refusal_hint,
    retry_after_seconds,
    root_cause,
)
from airflow_provider_azbatch.hooks.storage import BlobStorage, LogLocation
from airflow_provider_azbatch.hooks.translate import (
    ACTIVE_FILTER,
    ACTIVE_SELECT,
    ATTEMPT_SELECT,
    FAILED_FILTER,
    FAILED_SELECT,
    MAX_ATTEMPTS_LISTED,
    NODE_TIMES_SELECT,
    OUTCOME_SELECT,
    POOL_SELECT,
    RANGE_NOT_SATISFIABLE,
    RUNNING_FILTER,
    active_task_of,
    counts_of,
    failed_task_of,
    file_chunk_of,
    file_info,
    id_filter,
    job_status_of,
    node_times_of,
    side_task_runs_of,
    state_filter,
    tail_range,
    task_attempt_of,
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
from airflow_provider_azbatch.retries import Backoff

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.credentials import BatchCredential

# azure-core logs every request and response at INFO; in a task log that drowns the task's output.
_HTTP_LOGGER = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
if _HTTP_LOGGER.level == logging.NOTSET:
    _HTTP_LOGGER.setLevel(logging.WARNING)

# Polling interval for the SDK's delete/terminate pollers (its default is 5 s).
LRO_POLL_SECONDS = 1
# azure-core repeats GET/PUT/DELETE after a dropped connection, not POST/PATCH. Ours are idempotent
# (deterministic ids, TaskExists counts as added), so it may repeat them too (a per-call pipeline option).
RETRY_ALL_METHODS = frozenset({"HEAD", "GET", "PUT", "DELETE", "OPTIONS", "TRACE", "POST", "PATCH"})
# 409s of requests to a job that has ended (or is ending).
JOB_ENDED_CODES = ("JobCompleted", "JobBeingDeleted", "JobBeingTerminated", "JobNotActive")

T = TypeVar("T")
log = logging.getLogger(__name__)


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

    # -- read primitives of a watch step (the async hook has the same, as coroutines) ---------------
    def get_task_counts(self, job_id: str) -> TaskCounts:
        return counts_of(self.client.get_job_task_counts(job_id))

    def get_job_status(self, job_id: str) -> JobStatus | None:
        job = self.get_job(job_id, select=["state", "executionInfo"])
        return job_status_of(job) if job is not None else None

    def list_task_states(self, job_id: str, task_ids: Sequence[str]) -> dict[str, str]:
        tasks = self.client.list_tasks(job_id, filter=id_filter(task_ids), select=["id", "state"])
        return {task.id: enum_value(task.state) for task in tasks}

    def list_task_attempts(self, job_id: str, task_ids: Sequence[str] | None = None) -> dict[str, TaskAttempt]:
        """The latest attempt of the tasks named, or of the running ones (at most ``MAX_ATTEMPTS_LISTED``)."""
        where = id_filter(task_ids) if task_ids is not None else RUNNING_FILTER
        tasks = self.client.list_tasks(job_id, filter=where, select=ATTEMPT_SELECT)
        return {task.id: task_attempt_of(task) for task in itertools.islice(tasks, MAX_ATTEMPTS_LISTED)}

    def list_task_files(self, job_id: str, task_id: str) -> dict[str, FileInfo] | None:
        """The files at the root of the task's directory (stdout.txt, stderr.txt...); None once its node is gone."""
        try:
            files = self.client.list_task_files(job_id, task_id)
            return {f.name: file_info(f) for f in files if f.name and not f.is_directory}
        except ResourceNotFoundError:
            return None

    def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None:
        """Bytes ``start..end`` (inclusive) of a task file; None if it is gone."""
        try:
            return b"".join(self.client.download_task_file(job_id, task_id, path, ocp_range=f"bytes={start}-{end}"))
        except ResourceNotFoundError:
            return None

    def read_task_file_from(self, job_id: str, task_id: str, path: str, start: int, end: int) -> FileChunk | None:
        """Bytes ``start..end`` of a task file with its creation time; None if it is gone, no bytes (416) if it
        ends before ``start``."""
        url = f"/jobs/{quote(job_id, safe='')}/tasks/{quote(task_id, safe='')}/files/{quote(path, safe='')}"
        request = HttpRequest(
            "GET", url, params={"api-version": BATCH_API_VERSION}, headers={"ocp-range": f"bytes={start}-{end}"}
        )
        response = self.client.send_request(request)
        if response.status_code == 404:
            return None
        if response.status_code == RANGE_NOT_SATISFIABLE:
            return FileChunk(b"")
        response.raise_for_status()
        return file_chunk_of(response.content, response.headers)

    def read_task_file_tail(self, job_id: str, task_id: str, path: str, max_bytes: int) -> FileEnd | None:
        try:
            size = self.client.get_task_file_properties(job_id, task_id, path).content_length or 0
        except ResourceNotFoundError:
            return None
        span = tail_range(size, max_bytes)
        data = self.read_task_file(job_id, task_id, path, *span) if span else b""
        return FileEnd(data or b"", whole=span is None or span[0] == 0)

    def get_uploaded_log_size(self, location: dict[str, str], job_id: str, task_id: str, name: str) -> int | None:
        where = LogLocation(**location)
        return self.blob_storage("Uploaded task logs").blob_size(where.container, where.blob(job_id, task_id, name))

    def read_uploaded_log(
        self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
    ) -> bytes:
        where = LogLocation(**location)
        storage = self.blob_storage("Uploaded task logs")
        return storage.read_blob(where.container, where.blob(job_id, task_id, name), start, end)

    def get_pool_snapshot(self, pool_id: str) -> batch_models.BatchPool | None:
        return self.get_pool(pool_id, select=POOL_SELECT)

    def list_nodes_in_states(self, pool_id: str, states: Sequence[str]) -> list[batch_models.BatchNode]:
        select = ["id", "state", "stateTransitionTime", "startTaskInfo", "errors"]
        return list(self.client.list_nodes(pool_id, filter=state_filter(states), select=select))

    def read_node_file_tail(self, pool_id: str, node_id: str, path: str, max_bytes: int) -> FileEnd | None:
        try:
            size = self.client.get_node_file_properties(pool_id, node_id, path).content_length or 0
            span = tail_range(size, max_bytes)
            if span is None:
                return FileEnd(b"", whole=True)
            data = self.client.download_node_file(pool_id, node_id, path, ocp_range=f"bytes={span[0]}-{span[1]}")
            return FileEnd(b"".join(data), whole=span[0] == 0)
        except ResourceNotFoundError:
            return None

    def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None:
        """The pool's nodes with when each was allocated; None once the pool is gone."""
        try:
            return [node_times_of(node) for node in self.client.list_nodes(pool_id, select=NODE_TIMES_SELECT)]
        except ResourceNotFoundError:
            return None

    def list_active_dependencies(self, job_id: str) -> list[ActiveTask]:
        """The job's active tasks with what they depend on."""
        tasks = self.client.list_tasks(job_id, filter=ACTIVE_FILTER, select=ACTIVE_SELECT)
        return [active_task_of(task) for task in tasks]

    def list_failed_tasks(self, job_id: str) -> list[FailedTask]:
        """The job's tasks that completed with a failure, with their exit conditions."""
        tasks = self.client.list_tasks(job_id, filter=FAILED_FILTER, select=FAILED_SELECT)
        return [failed_task_of(task) for task in tasks]

    def list_preparation_status(self, job_id: str) -> list[SideTaskRun]:
        """Every run of the job's preparation and release tasks, one per node and kind."""
        statuses = self.client.list_job_preparation_and_release_task_status(job_id)
        return [run for status in statuses for run in side_task_runs_of(status)]

    # -- jobs ---------------------------------------------------------------------------------------
    def get_job(self, job_id: str, select: Sequence[str] | None = None) -> batch_models.BatchJob | None:
        try:
            return self.client.get_job(job_id, select=list(select) if select else None)
        except ResourceNotFoundError:
            return None

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
        except ResourceNotFoundError:
            return False
        except HttpResponseError as exc:
            if error_code(exc) in JOB_ENDED_CODES:
                return False
            raise
        if wait:
            poller.result()
        return True

    def delete_pool(self, pool_id: str, *, wait: bool = False) -> bool:
        """Delete the pool (its nodes are released); False if there is no such pool."""
        try:
            poller = self.client.begin_delete_pool(pool_id, polling_interval=LRO_POLL_SECONDS)
        except ResourceNotFoundError:
            return False
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
        try:
            return self.client.get_pool(pool_id, select=list(select) if select else None)
        except ResourceNotFoundError:
            return None

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
        """Run the job's remaining tasks on another pool: disabled (its running tasks requeued), given the pool,
        enabled again; Batch lets a job change pools only while it is disabled."""
        try:
            poller = self.client.begin_disable_job(
                job_id,
                batch_models.BatchJobDisableOptions(disable_tasks=batch_models.DisableBatchJobOption.REQUEUE),
                polling_interval=LRO_POLL_SECONDS,
            )
        except ResourceExistsError as exc:
            if error_code(exc) != "JobNotActive":  # disabling or disabled already: a repeated move
                raise
            poller = None
        if poller is not None:
            poller.result()
        else:
            self._wait_for_job_state(job_id, "disabled")
        self.client.update_job(
            job_id,
            batch_models.BatchJobUpdateOptions(pool_info=batch_models.BatchPoolInfo(pool_id=pool_id)),
            retry_on_methods=RETRY_ALL_METHODS,
        )
        self.client.begin_enable_job(job_id, polling_interval=LRO_POLL_SECONDS).result()

    def _wait_for_job_state(self, job_id: str, state: str, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while (status := self.get_job_status(job_id)) is not None and status.state != state:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Batch job {job_id} did not become {state} within {timeout:.0f} s")
            time.sleep(LRO_POLL_SECONDS)

    def retarget_pool(self, pool_id: str, *, formula: str | None = None, dedicated_nodes: int = 0) -> None:
        """Turn a pool to dedicated nodes: an autoscaled one gets ``formula``; a fixed one stops seeking nodes and
        asks for ``dedicated_nodes`` and no Spot nodes (nodes that go finish their tasks first)."""
        if formula is not None:
            self.client.enable_pool_auto_scale(
                pool_id,
                batch_models.BatchPoolEnableAutoScaleOptions(auto_scale_formula=formula),
                retry_on_methods=RETRY_ALL_METHODS,
            )
            return
        pool = self.client.get_pool(pool_id, select=["allocationState"])
        if enum_value(pool.allocation_state) != "steady":
            self.client.begin_stop_pool_resize(pool_id, polling_interval=LRO_POLL_SECONDS).result()
        self.client.begin_resize_pool(
            pool_id,
            batch_models.BatchPoolResizeOptions(
                target_dedicated_nodes=dedicated_nodes,
                target_low_priority_nodes=0,
                node_deallocation_option=batch_models.BatchNodeDeallocationOption.TASK_COMPLETION,
            ),
            polling_interval=LRO_POLL_SECONDS,
        )

    # -- Blob storage -------------------------------------------------------------------------------
    def blob_storage(self, needed_for: str) -> BlobStorage:
        """The connection's storage account (for task inputs, outputs and logs)."""
        return BlobStorage.from_settings(self.settings, needed_for, owner=self)

    # -- retried submission requests -----------------------------------------------------------------
    def _raise_if_quota(self, exc: BaseException) -> None:
        code = error_code(exc)
        if code in QUOTA_CODES:
            detail = describe_error(exc).removeprefix(f"{code}: ").rstrip(".")
            raise QuotaReachedError(code, QUOTA_CODES[code], self.account_name, detail) from None

    def _submission_step(self, what: str, job_id: str | None, action: Callable[[], T], *, creates: bool = False) -> T:
        """Run an idempotent submission request, repeating it while the service or network fail transiently.

        azure-core already retries each request a few times (honouring ``Retry-After``); this waits out
        longer trouble, up to ``[azbatch] submit_retry_seconds``, then says which step failed and what
        state the job was left in. A create request Batch refuses (400, e.g. a VM size it does not know)
        fails at once: the same request would be refused again, and nothing was created.
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
                        f"{budget:g}); last error: {describe_error(exc)}. {self._job_progress(job_id)}"
                    ) from exc
                log.warning("%s: %s; trying again in %.1f s", what, describe_error(exc), delay)
                time.sleep(delay)

    def _job_progress(self, job_id: str | None) -> str:
        """What a half-done submission left behind, for the error message (best effort)."""
        if job_id is None:
            return ""
        try:
            client = self.new_client(retry_total=0)
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
        try:
            return self.client.get_task(job_id, task_id, select=list(select) if select else None)
        except ResourceNotFoundError:
            return None

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
        try:
            return self.client.get_node(pool_id, node_id, select=list(select) if select else None)
        except ResourceNotFoundError:
            return None

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

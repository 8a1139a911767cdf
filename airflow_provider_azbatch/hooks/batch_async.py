"""``AzureBatchAsyncHook``: the same account through the native ``azure.batch.aio`` client, for triggers.

A triggerer may run a thousand triggers in one event loop; each opening its own client would mean a
thousand connection pools. The hook leases one client per connection and event loop, shared by every
trigger of that connection; the last one to leave closes it (and its credential).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from azure.batch.models import BatchError
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ResourceNotModifiedError,
    map_error,
)
from azure.core.rest import HttpRequest

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowNotFoundException, BaseHook, aget_connection, off_trigger_loop
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.batch import JOB_ENDED_CODES
from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings, ConnectionNotDefinedError, load_settings
from airflow_provider_azbatch.hooks.credentials import BATCH_API_VERSION, build_credential, client_kwargs
from airflow_provider_azbatch.hooks.errors import error_code
from airflow_provider_azbatch.hooks.storage import BlobStorage, LogLocation
from airflow_provider_azbatch.hooks.translate import (
    ACTIVE_FILTER,
    ACTIVE_SELECT,
    ATTEMPT_SELECT,
    FAILED_FILTER,
    FAILED_SELECT,
    JOB_CHANGE_SELECT,
    MAX_ATTEMPTS_LISTED,
    NODE_TIMES_SELECT,
    POOL_SELECT,
    RANGE_NOT_SATISFIABLE,
    RUNNING_FILTER,
    active_task_of,
    counts_from_wire,
    failed_task_of,
    file_chunk_of,
    file_info_from_wire,
    id_filter,
    job_change_of,
    job_status_of,
    node_times_of,
    odata_time,
    service_date,
    side_task_runs_of,
    state_filter,
    tail_range,
    task_attempt_of,
)
from airflow_provider_azbatch.model.records import (
    ActiveTask,
    FailedTask,
    FileChunk,
    FileEnd,
    FileInfo,
    JobChange,
    JobStatus,
    NodeTimes,
    SideTaskRun,
    TaskAttempt,
    TaskCounts,
)

if TYPE_CHECKING:
    from azure.batch.aio import BatchClient as AsyncBatchClient
    from azure.batch.models import BatchNode, BatchPool
    from azure.core.rest import AsyncHttpResponse

    from airflow_provider_azbatch.model.outcomes import TaskEnd

# What the SDK's generated operations raise for these statuses (the others: HttpResponseError).
_SDK_ERROR_MAP = {
    401: ClientAuthenticationError,
    404: ResourceNotFoundError,
    409: ResourceExistsError,
    304: ResourceNotModifiedError,
}


def _segment(value: str) -> str:
    """One URL path segment, quoted as the SDK quotes ids and file paths."""
    return quote(value, safe="")


def _batch_error(response: Any) -> BatchError | None:
    """The service's error body as the SDK's model (None if the body is not one)."""
    try:
        return BatchError(response.json())
    except Exception:
        return None


@dataclass
class _Lease:
    client: AsyncBatchClient
    credential: Any
    settings: BatchConnectionSettings
    users: int = 0
    # The hot reads of all the triggers in flight at once ([azbatch] requests_in_flight). A request waiting
    # here holds a coroutine; one waiting inside the pipeline holds its whole request graph (some 80
    # objects) for as long as it waits: long enough to reach the garbage collector's oldest generation,
    # whose collections stall the event loop (bench/README.md).
    gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(config.get_int("requests_in_flight")))


_leases: dict[tuple[int, str], _Lease] = {}
_locks: dict[int, asyncio.Lock] = {}


def _loop_lock() -> asyncio.Lock:
    loop_id = id(asyncio.get_running_loop())
    lock = _locks.get(loop_id)
    if lock is None:
        lock = _locks[loop_id] = asyncio.Lock()
    return lock


def open_client_count() -> int:
    """How many shared clients are open (for tests and diagnostics)."""
    return len(_leases)


class AzureBatchAsyncHook(BaseHook):
    """The read primitives of :class:`~airflow_provider_azbatch.hooks.batch.AzureBatchHook`, as coroutines.

    Use it inside ``async with hook.connected():``, which leases the shared client.
    """

    conn_name_attr = "azbatch_conn_id"
    default_conn_name = "azbatch_default"
    conn_type = "azbatch"
    hook_name = "Azure Batch (azbatch)"

    def __init__(self, azbatch_conn_id: str | None = None) -> None:
        super().__init__()
        self.azbatch_conn_id = azbatch_conn_id or config.get_str("default_conn_id")
        self._lease: _Lease | None = None

    async def get_settings(self) -> BatchConnectionSettings:
        """The connection's settings, read without blocking the event loop."""
        if self._lease is not None:
            return self._lease.settings
        try:
            conn = await aget_connection(self.azbatch_conn_id)
        except AirflowNotFoundException:
            raise ConnectionNotDefinedError(self.azbatch_conn_id) from None
        return await off_trigger_loop(load_settings, conn)

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[AzureBatchAsyncHook]:
        """Lease the shared aio client of this connection for the running event loop."""
        from azure.batch.aio import BatchClient as AsyncBatchClient

        key = (id(asyncio.get_running_loop()), self.azbatch_conn_id)
        async with _loop_lock():
            lease = _leases.get(key)
            if lease is None:
                settings = await self.get_settings()
                credential = build_credential(settings, asynchronous=True)
                client = AsyncBatchClient(settings.account_url, credential, **client_kwargs(settings))
                lease = _leases[key] = _Lease(client, credential, settings)
            lease.users += 1
        self._lease = lease
        try:
            yield self
        finally:
            self._lease = None
            async with _loop_lock():
                lease.users -= 1
                if lease.users == 0 and _leases.get(key) is lease:
                    del _leases[key]
                    await lease.client.close()
                    close = getattr(lease.credential, "close", None)
                    if close is not None:
                        result = close()
                        if asyncio.iscoroutine(result):
                            await result

    @property
    def client(self) -> AsyncBatchClient:
        if self._lease is None:
            raise RuntimeError("AzureBatchAsyncHook is used outside `async with hook.connected()`")
        return self._lease.client

    # -- read primitives of a watch step --------------------------------------------------------------
    async def get_task_counts(self, job_id: str) -> TaskCounts:
        response = await self._get(f"/jobs/{_segment(job_id)}/taskcounts")
        return counts_from_wire(response.json())

    async def get_job_status(self, job_id: str) -> JobStatus | None:
        try:
            job = await self.client.get_job(job_id, select=["state", "executionInfo"])
        except ResourceNotFoundError:
            return None
        return job_status_of(job)

    async def list_task_states(self, job_id: str, task_ids: Sequence[str]) -> dict[str, str]:
        tasks = self.client.list_tasks(job_id, filter=id_filter(task_ids), select=["id", "state"])
        return {task.id: enum_value(task.state) async for task in tasks}

    async def list_task_attempts(self, job_id: str, task_ids: Sequence[str] | None = None) -> dict[str, TaskAttempt]:
        where = id_filter(task_ids) if task_ids is not None else RUNNING_FILTER
        attempts: dict[str, TaskAttempt] = {}
        async for task in self.client.list_tasks(job_id, filter=where, select=ATTEMPT_SELECT):
            attempts[task.id] = task_attempt_of(task)
            if len(attempts) >= MAX_ATTEMPTS_LISTED:
                break
        return attempts

    async def list_task_files(self, job_id: str, task_id: str) -> dict[str, FileInfo] | None:
        files: dict[str, FileInfo] = {}
        url: str | None = f"/jobs/{_segment(job_id)}/tasks/{_segment(task_id)}/files"
        try:
            while url is not None:
                page = (await self._get(url)).json()
                for entry in page.get("value", ()):
                    if not entry.get("isDirectory"):
                        files[entry["name"]] = file_info_from_wire(entry)
                url = page.get("odata.nextLink")
        except ResourceNotFoundError:
            return None
        return files

    async def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None:
        url = f"/jobs/{_segment(job_id)}/tasks/{_segment(task_id)}/files/{_segment(path)}"
        try:
            return (await self._get(url, headers={"ocp-range": f"bytes={start}-{end}"})).content
        except ResourceNotFoundError:
            return None

    async def read_task_file_from(self, job_id: str, task_id: str, path: str, start: int, end: int) -> FileChunk | None:
        """Bytes ``start..end`` of a task file with its creation time; None if it is gone, no bytes (416) if it
        ends before ``start``."""
        url = f"/jobs/{_segment(job_id)}/tasks/{_segment(task_id)}/files/{_segment(path)}"
        try:
            response = await self._get(url, headers={"ocp-range": f"bytes={start}-{end}"})
        except ResourceNotFoundError:
            return None
        except HttpResponseError as exc:
            if exc.status_code == RANGE_NOT_SATISFIABLE:
                return FileChunk(b"")
            raise
        return file_chunk_of(response.content, response.headers)

    async def read_task_file_tail(self, job_id: str, task_id: str, path: str, max_bytes: int) -> FileEnd | None:
        try:
            size = (await self.client.get_task_file_properties(job_id, task_id, path)).content_length or 0
        except ResourceNotFoundError:
            return None
        span = tail_range(size, max_bytes)
        data = await self.read_task_file(job_id, task_id, path, *span) if span else b""
        return FileEnd(data or b"", whole=span is None or span[0] == 0)

    async def get_uploaded_log_size(self, location: dict[str, str], job_id: str, task_id: str, name: str) -> int | None:
        where = LogLocation(**location)
        return await self._storage().ablob_size(where.container, where.blob(job_id, task_id, name))

    async def read_uploaded_log(
        self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
    ) -> bytes:
        where = LogLocation(**location)
        return await self._storage().aread_blob(where.container, where.blob(job_id, task_id, name), start, end)

    async def get_pool_snapshot(self, pool_id: str) -> BatchPool | None:
        try:
            return await self.client.get_pool(pool_id, select=POOL_SELECT)
        except ResourceNotFoundError:
            return None

    async def list_nodes_in_states(self, pool_id: str, states: Sequence[str]) -> list[BatchNode]:
        select = ["id", "state", "stateTransitionTime", "startTaskInfo", "errors"]
        return [node async for node in self.client.list_nodes(pool_id, filter=state_filter(states), select=select)]

    async def read_node_file_tail(self, pool_id: str, node_id: str, path: str, max_bytes: int) -> FileEnd | None:
        try:
            size = (await self.client.get_node_file_properties(pool_id, node_id, path)).content_length or 0
            span = tail_range(size, max_bytes)
            if span is None:
                return FileEnd(b"", whole=True)
            stream = await self.client.download_node_file(
                pool_id, node_id, path, ocp_range=f"bytes={span[0]}-{span[1]}"
            )
            return FileEnd(b"".join([chunk async for chunk in stream]), whole=span[0] == 0)
        except ResourceNotFoundError:
            return None

    async def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None:
        try:
            return [node_times_of(n) async for n in self.client.list_nodes(pool_id, select=NODE_TIMES_SELECT)]
        except ResourceNotFoundError:
            return None

    async def list_active_dependencies(self, job_id: str) -> list[ActiveTask]:
        tasks = self.client.list_tasks(job_id, filter=ACTIVE_FILTER, select=ACTIVE_SELECT)
        return [active_task_of(task) async for task in tasks]

    async def list_failed_tasks(self, job_id: str) -> list[FailedTask]:
        tasks = self.client.list_tasks(job_id, filter=FAILED_FILTER, select=FAILED_SELECT)
        return [failed_task_of(task) async for task in tasks]

    async def list_task_ends(self, job_id: str) -> list[TaskEnd] | None:
        """How every task of a (completed) job ended, for a job event; None if the job is gone. Plain JSON, three
        fields a task, paged (a job of thousands of tasks is a few requests)."""
        from airflow_provider_azbatch.model.outcomes import TASK_END_SELECT, task_end_of

        ends: list[TaskEnd] = []
        url: str | None = f"/jobs/{_segment(job_id)}/tasks"
        first = True
        try:
            while url is not None:
                page = (await self._get(url, query={"$select": TASK_END_SELECT} if first else None)).json()
                first = False
                ends.extend(task_end_of(entry) for entry in page.get("value", ()))
                url = page.get("odata.nextLink")
        except ResourceNotFoundError:
            return None
        return ends

    async def list_preparation_status(self, job_id: str) -> list[SideTaskRun]:
        statuses = self.client.list_job_preparation_and_release_task_status(job_id)
        return [run async for status in statuses for run in side_task_runs_of(status)]

    # -- the account view's look ------------------------------------------------------------------------
    async def list_job_changes(
        self, since: datetime | None, select: Sequence[str] = ()
    ) -> tuple[list[JobChange], datetime]:
        """The jobs of the account whose state changed at or after ``since`` (service time), and the service's
        time when it answered (the response's ``Date``). ``since`` None lists nothing: a read of the clock.

        Only a filter Batch documents for List Jobs (``stateTransitionTime``: eq ne ge gt le lt) and ``$select``
        of three fields (each entry is some 100 bytes, and the service does the filtering), and the ``select``
        ones besides (top-level properties of a job, e.g. ``metadata``, ``executionInfo``).
        """
        cutoff = since if since is not None else datetime(9999, 12, 31, tzinfo=timezone.utc)
        fields = JOB_CHANGE_SELECT + "".join(f",{name}" for name in select if name not in JOB_CHANGE_SELECT)
        query = {"$filter": f"stateTransitionTime ge datetime'{odata_time(cutoff)}'", "$select": fields}
        changes: list[JobChange] = []
        url: str | None = "/jobs"
        answered: datetime | None = None
        while url is not None:
            # Not behind the per-job reads in flight ([azbatch] requests_in_flight): one look answers for all.
            response = await self._get(url, query=query if answered is None else None, gated=False)
            if answered is None:  # the first page's: the earliest, so no change is later than a look says
                answered = service_date(response.headers.get("Date"))
            page = response.json()
            changes.extend(job_change_of(entry) for entry in page.get("value", ()))
            url = page.get("odata.nextLink")
        assert answered is not None
        return changes, answered

    # -- the one write a trigger makes ------------------------------------------------------------------
    async def terminate_job(self, job_id: str, reason: str) -> bool:
        """Ask the service to terminate the job (not waiting for it); False if it had ended or is gone."""
        # SDK 15.1.0 quirk: see hooks/batch.py.
        from azure.batch.models._models import BatchJobTerminateOptions

        try:
            await self.client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason=reason))
        except ResourceNotFoundError:
            return False
        except HttpResponseError as exc:
            if error_code(exc) in JOB_ENDED_CODES:
                return False
            raise
        return True

    # -- the hot reads, as plain requests -----------------------------------------------------------------
    async def _get(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
        *,
        gated: bool = True,
    ) -> AsyncHttpResponse:
        """GET through the client's own pipeline (credential, retries, proxy, user agent), raising what the
        SDK's generated operations raise.

        A triggerer makes these three reads (task counts, a task's file list, new bytes of a file) for
        every job at every poll. Through the SDK's operations and models each costs about twice the CPU
        of the same request sent with ``send_request`` and read as plain JSON (bench/README.md), most of
        it in request building, tracing, header parsing and lazy model fields a poll does not use. The
        bodies are read to the same values the models give (:mod:`.translate`).
        """
        params = None if "api-version=" in url else {"api-version": BATCH_API_VERSION, **(query or {})}
        request = HttpRequest("GET", url, params=params, headers={"Accept": "application/json", **(headers or {})})
        assert self._lease is not None
        if gated:
            async with self._lease.gate:
                response = await self.client.send_request(request)
        else:
            response = await self.client.send_request(request)
        if response.status_code not in (200, 206):
            map_error(status_code=response.status_code, response=response, error_map=_SDK_ERROR_MAP)
            raise HttpResponseError(response=response, model=_batch_error(response))
        return response

    def _storage(self) -> BlobStorage:
        assert self._lease is not None
        return BlobStorage.from_settings(self._lease.settings, "Uploaded task logs")

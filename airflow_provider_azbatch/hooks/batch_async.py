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
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from azure.core.exceptions import HttpResponseError

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowNotFoundException, aget_connection, off_trigger_loop
from airflow_provider_azbatch.hooks import batch_reads as reads
from airflow_provider_azbatch.hooks.batch import job_ended
from airflow_provider_azbatch.hooks.connection import (
    AzbatchHookBase,
    BatchConnectionSettings,
    ConnectionNotDefinedError,
    load_settings,
)
from airflow_provider_azbatch.hooks.credentials import build_credential, client_kwargs
from airflow_provider_azbatch.hooks.storage import BlobStorage
from airflow_provider_azbatch.model import records

if TYPE_CHECKING:
    from azure.batch.aio import BatchClient as AsyncBatchClient
    from azure.batch.models import BatchNode, BatchPool

    from airflow_provider_azbatch.model.outcomes import TaskEnd

T = TypeVar("T")


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


class AzureBatchAsyncHook(AzbatchHookBase):
    """The read primitives of :class:`~airflow_provider_azbatch.hooks.batch.AzureBatchHook`, as coroutines.

    Use it inside ``async with hook.connected():``, which leases the shared client.
    """

    def __init__(self, azbatch_conn_id: str | None = None) -> None:
        super().__init__(azbatch_conn_id)
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

    # -- read primitives of a watch step (written once, for both hooks: .batch_reads) ------------------------
    async def get_task_counts(self, job_id: str) -> records.TaskCounts:
        return await self._read(reads.task_counts(job_id))

    async def get_job_status(self, job_id: str) -> records.JobStatus | None:
        return await self._read(reads.job_status(job_id))

    async def list_task_states(self, job_id: str, task_ids: Sequence[str]) -> dict[str, str]:
        return await self._read(reads.task_states(job_id, task_ids))

    async def list_task_attempts(
        self, job_id: str, task_ids: Sequence[str] | None = None
    ) -> dict[str, records.TaskAttempt]:
        return await self._read(reads.task_attempts(job_id, task_ids))

    async def list_task_files(self, job_id: str, task_id: str) -> dict[str, records.FileInfo] | None:
        return await self._read(reads.task_files(job_id, task_id))

    async def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None:
        return await self._read(reads.task_file(job_id, task_id, path, start, end))

    async def read_task_file_from(
        self, job_id: str, task_id: str, path: str, start: int, end: int
    ) -> records.FileChunk | None:
        return await self._read(reads.task_file_from(job_id, task_id, path, start, end))

    async def read_task_file_tail(self, job_id: str, task_id: str, path: str, max_bytes: int) -> records.FileEnd | None:
        return await self._read(reads.task_file_tail(job_id, task_id, path, max_bytes))

    async def get_uploaded_log_size(self, location: dict[str, str], job_id: str, task_id: str, name: str) -> int | None:
        return await self._read(reads.uploaded_log_size(location, job_id, task_id, name))

    async def read_uploaded_log(
        self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
    ) -> bytes:
        return await self._read(reads.uploaded_log(location, job_id, task_id, name, start, end))

    async def get_pool_snapshot(self, pool_id: str) -> BatchPool | None:
        return await self._read(reads.pool_snapshot(pool_id))

    async def list_nodes_in_states(self, pool_id: str, states: Sequence[str]) -> list[BatchNode]:
        return await self._read(reads.nodes_in_states(pool_id, states))

    async def read_node_file_tail(
        self, pool_id: str, node_id: str, path: str, max_bytes: int
    ) -> records.FileEnd | None:
        return await self._read(reads.node_file_tail(pool_id, node_id, path, max_bytes))

    async def list_pool_nodes(self, pool_id: str) -> list[records.NodeTimes] | None:
        return await self._read(reads.pool_nodes(pool_id))

    async def list_active_dependencies(self, job_id: str) -> list[records.ActiveTask]:
        return await self._read(reads.active_dependencies(job_id))

    async def list_failed_tasks(self, job_id: str) -> list[records.FailedTask]:
        return await self._read(reads.failed_tasks(job_id))

    async def list_task_ends(self, job_id: str) -> list[TaskEnd] | None:
        """How every task of a (completed) job ended, for a job event; None if the job is gone."""
        return await self._read(reads.task_ends(job_id))

    async def list_preparation_status(self, job_id: str) -> list[records.SideTaskRun]:
        return await self._read(reads.preparation_status(job_id))

    # -- the account view's look ------------------------------------------------------------------------
    async def list_job_changes(
        self, since: datetime | None, select: Sequence[str] = ()
    ) -> tuple[list[records.JobChange], datetime]:
        """The jobs of the account whose state changed at or after ``since`` (service time), and the service's
        time when it answered (see :func:`.batch_reads.job_changes`)."""
        return await self._read(reads.job_changes(since, select))

    # -- the one write a trigger makes ------------------------------------------------------------------
    async def terminate_job(self, job_id: str, reason: str) -> bool:
        """Ask the service to terminate the job (not waiting for it); False if it had ended or is gone."""
        # SDK 15.1.0 quirk: see hooks/batch.py.
        from azure.batch.models._models import BatchJobTerminateOptions

        try:
            await self.client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason=reason))
        except HttpResponseError as exc:
            if job_ended(exc):
                return False
            raise
        return True

    # -- answering the reads ------------------------------------------------------------------------------
    async def _read(self, read: reads.Read[T]) -> T:
        return await reads.adrive(read, self._answer)

    async def _answer(self, request: reads.Request) -> Any:
        if isinstance(request, reads.Get):
            return await self._get(request)
        if isinstance(request, reads.Blob):
            if request.span is None:
                return await self._storage().ablob_size(request.container, request.blob)
            return await self._storage().aread_blob(request.container, request.blob, *request.span)
        call = getattr(self.client, request.method)(*request.args, **request.kwargs)
        if isinstance(request, reads.Listing):
            items = []
            async for item in call:
                items.append(item)
                if request.limit is not None and len(items) >= request.limit:
                    break
            return items
        if isinstance(request, reads.Download):
            return b"".join([chunk async for chunk in await call])
        return await call

    async def _get(self, get: reads.Get) -> Any:
        """GET through the client's own pipeline, behind the gate of reads in flight unless not ``gated``."""
        request = reads.http_request(get)
        assert self._lease is not None
        if get.gated:
            async with self._lease.gate:
                response = await self.client.send_request(request)
        else:
            response = await self.client.send_request(request)
        reads.raise_for_status(response)
        return response

    def _storage(self) -> BlobStorage:
        assert self._lease is not None
        return BlobStorage.from_settings(self._lease.settings, "Uploaded task logs")

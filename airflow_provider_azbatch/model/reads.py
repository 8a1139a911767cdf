"""What the watch, the results and the CLI read from Batch: the reads both hooks answer, and each read as a value.

:class:`BatchReads` is what ``AzureBatchHook`` answers, :class:`AsyncBatchReads` the same reads as coroutines
(``AzureBatchAsyncHook``); mypy proves both hooks implement them (see
:mod:`~airflow_provider_azbatch.watching.drivers`). A sans-I/O watch step does not call a hook: it yields
:class:`Call` values, built by the functions below (one per read, typed like the read), and a driver answers
them with whichever hook it holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from azure.batch.models import BatchNode, BatchPool

    from airflow_provider_azbatch.model import records

R_co = TypeVar("R_co", covariant=True)


class BatchReads(Protocol):
    """The reads of ``AzureBatchHook`` a watch step is built from."""

    def get_task_counts(self, job_id: str) -> records.TaskCounts: ...
    def get_job_status(self, job_id: str) -> records.JobStatus | None: ...
    def list_task_states(self, job_id: str, task_ids: Sequence[str]) -> dict[str, str]: ...
    def list_task_attempts(
        self, job_id: str, task_ids: Sequence[str] | None = None
    ) -> dict[str, records.TaskAttempt]: ...
    def list_task_files(self, job_id: str, task_id: str) -> dict[str, records.FileInfo] | None: ...
    def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None: ...
    def read_task_file_from(
        self, job_id: str, task_id: str, path: str, start: int, end: int
    ) -> records.FileChunk | None: ...
    def read_task_file_tail(self, job_id: str, task_id: str, path: str, max_bytes: int) -> records.FileEnd | None: ...
    def get_uploaded_log_size(self, location: dict[str, str], job_id: str, task_id: str, name: str) -> int | None: ...
    def read_uploaded_log(
        self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
    ) -> bytes: ...
    def get_pool_snapshot(self, pool_id: str) -> BatchPool | None: ...
    def list_nodes_in_states(self, pool_id: str, states: Sequence[str]) -> list[BatchNode]: ...
    def read_node_file_tail(self, pool_id: str, node_id: str, path: str, max_bytes: int) -> records.FileEnd | None: ...
    def list_pool_nodes(self, pool_id: str) -> list[records.NodeTimes] | None: ...
    def list_active_dependencies(self, job_id: str) -> list[records.ActiveTask]: ...
    def list_failed_tasks(self, job_id: str) -> list[records.FailedTask]: ...
    def list_preparation_status(self, job_id: str) -> list[records.SideTaskRun]: ...


class AsyncBatchReads(Protocol):
    """The reads of :class:`BatchReads` as coroutines: what ``AzureBatchAsyncHook`` answers in the triggerer."""

    async def get_task_counts(self, job_id: str) -> records.TaskCounts: ...
    async def get_job_status(self, job_id: str) -> records.JobStatus | None: ...
    async def list_task_states(self, job_id: str, task_ids: Sequence[str]) -> dict[str, str]: ...
    async def list_task_attempts(
        self, job_id: str, task_ids: Sequence[str] | None = None
    ) -> dict[str, records.TaskAttempt]: ...
    async def list_task_files(self, job_id: str, task_id: str) -> dict[str, records.FileInfo] | None: ...
    async def read_task_file(self, job_id: str, task_id: str, path: str, start: int, end: int) -> bytes | None: ...
    async def read_task_file_from(
        self, job_id: str, task_id: str, path: str, start: int, end: int
    ) -> records.FileChunk | None: ...
    async def read_task_file_tail(
        self, job_id: str, task_id: str, path: str, max_bytes: int
    ) -> records.FileEnd | None: ...
    async def get_uploaded_log_size(
        self, location: dict[str, str], job_id: str, task_id: str, name: str
    ) -> int | None: ...
    async def read_uploaded_log(
        self, location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
    ) -> bytes: ...
    async def get_pool_snapshot(self, pool_id: str) -> BatchPool | None: ...
    async def list_nodes_in_states(self, pool_id: str, states: Sequence[str]) -> list[BatchNode]: ...
    async def read_node_file_tail(
        self, pool_id: str, node_id: str, path: str, max_bytes: int
    ) -> records.FileEnd | None: ...
    async def list_pool_nodes(self, pool_id: str) -> list[records.NodeTimes] | None: ...
    async def list_active_dependencies(self, job_id: str) -> list[records.ActiveTask]: ...
    async def list_failed_tasks(self, job_id: str) -> list[records.FailedTask]: ...
    async def list_preparation_status(self, job_id: str) -> list[records.SideTaskRun]: ...


@dataclass(frozen=True)
class Call(Generic[R_co]):
    """One read a step asks for: its ``name`` (the method of :class:`BatchReads`), and how each hook makes it."""

    name: str
    sync: Callable[[BatchReads], R_co]
    asynchronous: Callable[[AsyncBatchReads], Awaitable[R_co]]
    # The pool a read of a pool reads (what a failed read of it names).
    pool_id: str | None = None


# One function per read, taking the read's arguments: mypy checks them, and what the step gets back, against the
# Protocols. The two lambdas read alike; they differ in the hook they are given.


def get_task_counts(job_id: str) -> Call[records.TaskCounts]:
    return Call("get_task_counts", lambda h: h.get_task_counts(job_id), lambda h: h.get_task_counts(job_id))


def get_job_status(job_id: str) -> Call[records.JobStatus | None]:
    return Call("get_job_status", lambda h: h.get_job_status(job_id), lambda h: h.get_job_status(job_id))


def list_task_states(job_id: str, task_ids: Sequence[str]) -> Call[dict[str, str]]:
    return Call(
        "list_task_states",
        lambda h: h.list_task_states(job_id, task_ids),
        lambda h: h.list_task_states(job_id, task_ids),
    )


def list_task_attempts(job_id: str, task_ids: Sequence[str] | None) -> Call[dict[str, records.TaskAttempt]]:
    return Call(
        "list_task_attempts",
        lambda h: h.list_task_attempts(job_id, task_ids),
        lambda h: h.list_task_attempts(job_id, task_ids),
    )


def list_task_files(job_id: str, task_id: str) -> Call[dict[str, records.FileInfo] | None]:
    return Call(
        "list_task_files", lambda h: h.list_task_files(job_id, task_id), lambda h: h.list_task_files(job_id, task_id)
    )


def read_task_file(job_id: str, task_id: str, path: str, start: int, end: int) -> Call[bytes | None]:
    return Call(
        "read_task_file",
        lambda h: h.read_task_file(job_id, task_id, path, start, end),
        lambda h: h.read_task_file(job_id, task_id, path, start, end),
    )


def read_task_file_from(job_id: str, task_id: str, path: str, start: int, end: int) -> Call[records.FileChunk | None]:
    return Call(
        "read_task_file_from",
        lambda h: h.read_task_file_from(job_id, task_id, path, start, end),
        lambda h: h.read_task_file_from(job_id, task_id, path, start, end),
    )


def read_task_file_tail(job_id: str, task_id: str, path: str, max_bytes: int) -> Call[records.FileEnd | None]:
    return Call(
        "read_task_file_tail",
        lambda h: h.read_task_file_tail(job_id, task_id, path, max_bytes),
        lambda h: h.read_task_file_tail(job_id, task_id, path, max_bytes),
    )


def get_uploaded_log_size(location: dict[str, str], job_id: str, task_id: str, name: str) -> Call[int | None]:
    return Call(
        "get_uploaded_log_size",
        lambda h: h.get_uploaded_log_size(location, job_id, task_id, name),
        lambda h: h.get_uploaded_log_size(location, job_id, task_id, name),
    )


def read_uploaded_log(
    location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int
) -> Call[bytes]:
    return Call(
        "read_uploaded_log",
        lambda h: h.read_uploaded_log(location, job_id, task_id, name, start, end),
        lambda h: h.read_uploaded_log(location, job_id, task_id, name, start, end),
    )


def get_pool_snapshot(pool_id: str) -> Call[BatchPool | None]:
    return Call(
        "get_pool_snapshot", lambda h: h.get_pool_snapshot(pool_id), lambda h: h.get_pool_snapshot(pool_id), pool_id
    )


def list_nodes_in_states(pool_id: str, states: Sequence[str]) -> Call[list[BatchNode]]:
    return Call(
        "list_nodes_in_states",
        lambda h: h.list_nodes_in_states(pool_id, states),
        lambda h: h.list_nodes_in_states(pool_id, states),
        pool_id,
    )


def read_node_file_tail(pool_id: str, node_id: str, path: str, max_bytes: int) -> Call[records.FileEnd | None]:
    return Call(
        "read_node_file_tail",
        lambda h: h.read_node_file_tail(pool_id, node_id, path, max_bytes),
        lambda h: h.read_node_file_tail(pool_id, node_id, path, max_bytes),
        pool_id,
    )


def list_pool_nodes(pool_id: str) -> Call[list[records.NodeTimes] | None]:
    return Call("list_pool_nodes", lambda h: h.list_pool_nodes(pool_id), lambda h: h.list_pool_nodes(pool_id), pool_id)


def list_active_dependencies(job_id: str) -> Call[list[records.ActiveTask]]:
    return Call(
        "list_active_dependencies",
        lambda h: h.list_active_dependencies(job_id),
        lambda h: h.list_active_dependencies(job_id),
    )


def list_failed_tasks(job_id: str) -> Call[list[records.FailedTask]]:
    return Call("list_failed_tasks", lambda h: h.list_failed_tasks(job_id), lambda h: h.list_failed_tasks(job_id))


def list_preparation_status(job_id: str) -> Call[list[records.SideTaskRun]]:
    return Call(
        "list_preparation_status",
        lambda h: h.list_preparation_status(job_id),
        lambda h: h.list_preparation_status(job_id),
    )

"""The read primitives of both Batch hooks, written once: what each read asks and what its answers mean. No I/O.

Each read is a generator (as the watch is: :mod:`airflow_provider_azbatch.watching.calls`): it yields the requests
it needs (a call of the SDK client, a page of a listing, a plain GET, a blob read) and gets their answers (or their
errors, thrown into it), and returns the provider's own records. :class:`~.batch.AzureBatchHook` answers them with
the synchronous client (:func:`drive`), :class:`~.batch_async.AzureBatchAsyncHook` with the ``aio`` one
(:func:`adrive`), so the request shapes, the paging, the limits and the "gone" cases are the same for both.

The hot reads (task counts, a task's file list, new bytes of a file) are plain GETs through the client's own
pipeline (credential, retries, proxy, user agent), raising what the SDK's generated operations raise: through the
SDK's operations and models each costs about twice the CPU (bench/README.md), most of it in request building,
tracing, header parsing and lazy model fields a poll does not use. The bodies are read to the same values the
models give (:mod:`.translate`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, TypeVar
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
from azure.core.rest import AsyncHttpResponse, HttpRequest, HttpResponse

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.credentials import BATCH_API_VERSION
from airflow_provider_azbatch.hooks.storage import LogLocation
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
from airflow_provider_azbatch.model import records

if TYPE_CHECKING:
    from airflow_provider_azbatch.model.outcomes import TaskEnd

T = TypeVar("T")

NODE_STATE_SELECT = ["id", "state", "stateTransitionTime", "startTaskInfo", "errors"]
# What the SDK's generated operations raise for these statuses (the others: HttpResponseError).
SDK_ERROR_MAP = {
    401: ClientAuthenticationError,
    404: ResourceNotFoundError,
    409: ResourceExistsError,
    304: ResourceNotModifiedError,
}


@dataclass(slots=True)
class Call:
    """``client.<method>(*args, **kwargs)``: one answer (a model)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Listing(Call):
    """A paged listing of the SDK client, read to its end or to ``limit`` items: a list."""

    limit: int | None = None


@dataclass(slots=True)
class Download(Call):
    """A file download of the SDK client: its bytes."""


@dataclass(slots=True)
class Get:
    """A plain GET through the client's pipeline: the response (its body read), errors raised as the SDK's.

    ``gated``: behind the reads in flight the async hook allows at once (``[azbatch] requests_in_flight``).
    """

    url: str
    headers: dict[str, str] | None = None
    query: dict[str, str] | None = None
    gated: bool = True


@dataclass(slots=True)
class Blob:
    """A task's log uploaded to Blob storage: its size (None: not uploaded), or with ``span`` its bytes
    ``start..end``."""

    container: str
    blob: str
    span: tuple[int, int] | None = None


Request = Call | Get | Blob
Read = Generator[Request, Any, T]


class _Run(Generic[T]):
    """A read in progress: its pending request, or its result once it is done."""

    def __init__(self, read: Read[T]) -> None:
        self._read = read
        self.done = False
        self.result: T | None = None
        self.answered(None)  # a generator starts with a send of None

    def answered(self, response: Any) -> None:
        try:
            self.request = self._read.send(response)
        except StopIteration as stop:
            self.done, self.result = True, stop.value

    def failed(self, error: Exception) -> None:
        try:
            self.request = self._read.throw(error)
        except StopIteration as stop:
            self.done, self.result = True, stop.value


def drive(read: Read[T], answer: Callable[[Request], Any]) -> T:
    """Run ``read``, answering its requests with ``answer`` (errors are thrown into it)."""
    run = _Run(read)
    while not run.done:
        try:
            response = answer(run.request)
        except Exception as exc:
            run.failed(exc)
            continue
        run.answered(response)
    return run.result  # type: ignore[return-value]


async def adrive(read: Read[T], answer: Callable[[Request], Awaitable[Any]]) -> T:
    """:func:`drive` with an asynchronous ``answer``."""
    run = _Run(read)
    while not run.done:
        try:
            response = await answer(run.request)
        except Exception as exc:
            run.failed(exc)
        else:
            run.answered(response)
    return run.result  # type: ignore[return-value]


# -- plain GETs -----------------------------------------------------------------------------------------
def http_request(get: Get) -> HttpRequest:
    params = None if "api-version=" in get.url else {"api-version": BATCH_API_VERSION, **(get.query or {})}
    return HttpRequest("GET", get.url, params=params, headers={"Accept": "application/json", **(get.headers or {})})


def raise_for_status(response: HttpResponse | AsyncHttpResponse) -> None:
    """Raise what the SDK's generated operations raise for an answer that is not a success."""
    if response.status_code not in (200, 206):
        map_error(status_code=response.status_code, response=response, error_map=SDK_ERROR_MAP)
        raise HttpResponseError(response=response, model=_batch_error(response))


def _batch_error(response: HttpResponse | AsyncHttpResponse) -> BatchError | None:
    """The service's error body as the SDK's model (None if the body is not one)."""
    try:
        return BatchError(response.json())
    except Exception:
        return None


def _segment(value: str) -> str:
    """One URL path segment, quoted as the SDK quotes ids and file paths."""
    return quote(value, safe="")


def _file_url(job_id: str, task_id: str, path: str) -> str:
    return f"/jobs/{_segment(job_id)}/tasks/{_segment(task_id)}/files/{_segment(path)}"


def _pages(url: str, query: dict[str, str] | None = None, *, gated: bool = True) -> Read[tuple[Any, list[Any]]]:
    """The first page's response (for its headers) and the entries of every page of a plain listing (``query``
    goes with the first page only: the next links carry it)."""
    first: Any = None
    entries: list[Any] = []
    next_url: str | None = url
    while next_url is not None:
        response = yield Get(next_url, query=query if first is None else None, gated=gated)
        first = first if first is not None else response
        page = response.json()
        entries.extend(page.get("value", ()))
        next_url = page.get("odata.nextLink")
    return first, entries


# -- the read primitives of a watch step ---------------------------------------------------------------------
def task_counts(job_id: str) -> Read[records.TaskCounts]:
    response = yield Get(f"/jobs/{_segment(job_id)}/taskcounts")
    return counts_from_wire(response.json())


def job_status(job_id: str) -> Read[records.JobStatus | None]:
    try:
        job = yield Call("get_job", (job_id,), {"select": ["state", "executionInfo"]})
    except ResourceNotFoundError:
        return None
    return job_status_of(job)


def task_states(job_id: str, task_ids: Sequence[str]) -> Read[dict[str, str]]:
    tasks = yield Listing("list_tasks", (job_id,), {"filter": id_filter(task_ids), "select": ["id", "state"]})
    return {task.id: enum_value(task.state) for task in tasks}


def task_attempts(job_id: str, task_ids: Sequence[str] | None) -> Read[dict[str, records.TaskAttempt]]:
    """The latest attempt of the tasks named, or of the running ones (at most ``MAX_ATTEMPTS_LISTED``)."""
    where = id_filter(task_ids) if task_ids is not None else RUNNING_FILTER
    listing = Listing("list_tasks", (job_id,), {"filter": where, "select": ATTEMPT_SELECT}, MAX_ATTEMPTS_LISTED)
    tasks = yield listing
    return {task.id: task_attempt_of(task) for task in tasks}


def task_files(job_id: str, task_id: str) -> Read[dict[str, records.FileInfo] | None]:
    """The files at the root of the task's directory (stdout.txt, stderr.txt...); None once its node is gone."""
    try:
        _, entries = yield from _pages(f"/jobs/{_segment(job_id)}/tasks/{_segment(task_id)}/files")
    except ResourceNotFoundError:
        return None
    return {entry["name"]: file_info_from_wire(entry) for entry in entries if not entry.get("isDirectory")}


def task_file(job_id: str, task_id: str, path: str, start: int, end: int) -> Read[bytes | None]:
    """Bytes ``start..end`` (inclusive) of a task file; None if it is gone."""
    try:
        response = yield Get(_file_url(job_id, task_id, path), headers={"ocp-range": f"bytes={start}-{end}"})
    except ResourceNotFoundError:
        return None
    return bytes(response.content)


def task_file_from(job_id: str, task_id: str, path: str, start: int, end: int) -> Read[records.FileChunk | None]:
    """Bytes ``start..end`` of a task file with its creation time; None if it is gone, no bytes (416) if it
    ends before ``start``."""
    try:
        response = yield Get(_file_url(job_id, task_id, path), headers={"ocp-range": f"bytes={start}-{end}"})
    except ResourceNotFoundError:
        return None
    except HttpResponseError as exc:
        if exc.status_code == RANGE_NOT_SATISFIABLE:
            return records.FileChunk(b"")
        raise
    return file_chunk_of(response.content, response.headers)


def task_file_tail(job_id: str, task_id: str, path: str, max_bytes: int) -> Read[records.FileEnd | None]:
    try:
        properties = yield Call("get_task_file_properties", (job_id, task_id, path))
    except ResourceNotFoundError:
        return None
    span = tail_range(properties.content_length or 0, max_bytes)
    data = (yield from task_file(job_id, task_id, path, *span)) if span else b""
    return records.FileEnd(data or b"", whole=span is None or span[0] == 0)


def uploaded_log_size(location: dict[str, str], job_id: str, task_id: str, name: str) -> Read[int | None]:
    where = LogLocation(**location)
    size: int | None = yield Blob(where.container, where.blob(job_id, task_id, name))
    return size


def uploaded_log(location: dict[str, str], job_id: str, task_id: str, name: str, start: int, end: int) -> Read[bytes]:
    where = LogLocation(**location)
    data: bytes = yield Blob(where.container, where.blob(job_id, task_id, name), (start, end))
    return data


def found(call: Call) -> Read[Any]:
    """The model ``call`` answers; None if it is gone."""
    try:
        return (yield call)
    except ResourceNotFoundError:
        return None


def pool_snapshot(pool_id: str) -> Read[Any]:
    """The pool's state, allocation and sizes (a ``BatchPool``); None if there is no such pool."""
    return (yield from found(Call("get_pool", (pool_id,), {"select": POOL_SELECT})))


def nodes_in_states(pool_id: str, states: Sequence[str]) -> Read[list[Any]]:
    nodes: list[Any] = yield Listing(
        "list_nodes", (pool_id,), {"filter": state_filter(states), "select": NODE_STATE_SELECT}
    )
    return nodes


def node_file_tail(pool_id: str, node_id: str, path: str, max_bytes: int) -> Read[records.FileEnd | None]:
    try:
        properties = yield Call("get_node_file_properties", (pool_id, node_id, path))
        span = tail_range(properties.content_length or 0, max_bytes)
        if span is None:
            return records.FileEnd(b"", whole=True)
        data = yield Download(
            "download_node_file", (pool_id, node_id, path), {"ocp_range": f"bytes={span[0]}-{span[1]}"}
        )
        return records.FileEnd(data, whole=span[0] == 0)
    except ResourceNotFoundError:
        return None


def pool_nodes(pool_id: str) -> Read[list[records.NodeTimes] | None]:
    """The pool's nodes with when each was allocated; None once the pool is gone."""
    try:
        nodes = yield Listing("list_nodes", (pool_id,), {"select": NODE_TIMES_SELECT})
    except ResourceNotFoundError:
        return None
    return [node_times_of(node) for node in nodes]


def active_dependencies(job_id: str) -> Read[list[records.ActiveTask]]:
    """The job's active tasks with what they depend on."""
    tasks = yield Listing("list_tasks", (job_id,), {"filter": ACTIVE_FILTER, "select": ACTIVE_SELECT})
    return [active_task_of(task) for task in tasks]


def failed_tasks(job_id: str) -> Read[list[records.FailedTask]]:
    """The job's tasks that completed with a failure, with their exit conditions."""
    tasks = yield Listing("list_tasks", (job_id,), {"filter": FAILED_FILTER, "select": FAILED_SELECT})
    return [failed_task_of(task) for task in tasks]


def preparation_status(job_id: str) -> Read[list[records.SideTaskRun]]:
    """Every run of the job's preparation and release tasks, one per node and kind."""
    statuses = yield Listing("list_job_preparation_and_release_task_status", (job_id,))
    return [run for status in statuses for run in side_task_runs_of(status)]


def task_ends(job_id: str) -> Read[list[TaskEnd] | None]:
    """How every task of a (completed) job ended, for a job event; None if the job is gone. Plain JSON, three
    fields a task, paged (a job of thousands of tasks is a few requests)."""
    from airflow_provider_azbatch.model.outcomes import TASK_END_SELECT, task_end_of

    try:
        _, entries = yield from _pages(f"/jobs/{_segment(job_id)}/tasks", {"$select": TASK_END_SELECT})
    except ResourceNotFoundError:
        return None
    return [task_end_of(entry) for entry in entries]


def job_changes(since: datetime | None, select: Sequence[str] = ()) -> Read[tuple[list[records.JobChange], datetime]]:
    """The jobs of the account whose state changed at or after ``since`` (service time), and the service's
    time when it answered (the response's ``Date``). ``since`` None lists nothing: a read of the clock.

    Only a filter Batch documents for List Jobs (``stateTransitionTime``: eq ne ge gt le lt) and ``$select``
    of three fields (each entry is some 100 bytes, and the service does the filtering), and the ``select``
    ones besides (top-level properties of a job, e.g. ``metadata``, ``executionInfo``).
    """
    cutoff = since if since is not None else datetime(9999, 12, 31, tzinfo=timezone.utc)
    fields = JOB_CHANGE_SELECT + "".join(f",{name}" for name in select if name not in JOB_CHANGE_SELECT)
    query = {"$filter": f"stateTransitionTime ge datetime'{odata_time(cutoff)}'", "$select": fields}
    # Not behind the per-job reads in flight ([azbatch] requests_in_flight): one look answers for all.
    first, entries = yield from _pages("/jobs", query, gated=False)
    # The first page's date: the earliest, so no change is later than a look says.
    answered = service_date(first.headers.get("Date"))
    return [job_change_of(entry) for entry in entries], answered

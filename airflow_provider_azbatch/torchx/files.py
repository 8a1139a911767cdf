"""Where a replica's files are, read through the hooks' read primitives (the watch's own).

Replica 0 of a role is its Batch task (a multi-instance task's primary): its files are the task's
(:class:`TaskFiles`: ``read_task_file_from``, ``read_task_file_tail``, as the watch reads a task's output), then
what Batch uploaded with its output (:class:`BlobFiles`: ``read_uploaded_log``, as the watch reads a task's output
once its node is gone). Replica ``k > 0`` runs in a subtask's directory on another node (:class:`NodeFiles`), then
under ``replicas/<k>/`` of its task's uploaded logs. A subtask's directory is the one place no read primitive
covers (the watch follows tasks, not subtasks): its ranged reads are this module's own, its tail is
``read_node_file_tail``.

A file not there (yet, or any more: its node removed, its blob not uploaded) reads as None.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from airflow_provider_azbatch.model.records import FileEnd

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.hooks.storage import LogLocation

# A record is a few hundred bytes.
RECORD_BYTES = 4096
# The end of a file read for its last lines (a failed replica's stderr in describe's message).
TAIL_BYTES = 256 * 1024
# The HTTP answers that say a file is not there in a way of its own: nothing at or past the range's start (yet),
# and a node that cannot answer for its files any more (being removed).
RANGE_NOT_SATISFIABLE, NODE_CONFLICT = 416, 409

T = TypeVar("T")


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)


# The SDK logs a warning with a traceback ("Ran into a deserialization error") for every file it does not find
# (its failsafe read of the error body of a streamed or bodiless answer); a replica's file not there (yet, or any
# more) is an answer here, so the warning is dropped while these reads run, in their thread only.
_SDK_MODEL_LOGGER = "azure.batch._utils.model_base"
_reading = threading.local()


class _ExpectedMisses(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_reading, "active", False)


logging.getLogger(_SDK_MODEL_LOGGER).addFilter(_ExpectedMisses())


@contextlib.contextmanager
def _expecting_misses() -> Iterator[None]:
    _reading.active = True
    try:
        yield
    finally:
        _reading.active = False


def _missing_as(read: Callable[[], T | None], empty_range: T | None) -> T | None:
    """``read()``; None when the file is not there, ``empty_range`` for a range past its end."""
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    try:
        with _expecting_misses():
            return read()
    except ResourceNotFoundError:
        return None
    except HttpResponseError as exc:
        if _status(exc) == RANGE_NOT_SATISFIABLE:
            return empty_range
        if _status(exc) == NODE_CONFLICT:
            return None
        raise


class Files:
    """A directory of a replica's files."""

    kind = "node"

    def read(self, name: str, start: int, end: int) -> bytes | None:
        """Bytes ``start..end`` (inclusive, fewer at the end of the file; empty past it); None when the file (or
        its node, or its blob) is not there."""
        return _missing_as(lambda: self._read(name, start, end), b"")

    def end(self, name: str, max_bytes: int = TAIL_BYTES) -> FileEnd | None:
        """The last ``max_bytes`` of the file; None when it is not there."""
        return _missing_as(lambda: self._end(name, max_bytes), None)

    def _read(self, name: str, start: int, end: int) -> bytes | None:
        raise NotImplementedError

    def _end(self, name: str, max_bytes: int) -> FileEnd | None:
        raise NotImplementedError


@dataclass
class TaskFiles(Files):
    """Replica 0's: the task's own files (on its node)."""

    hook: AzureBatchHook
    job_id: str
    task_id: str

    def _read(self, name: str, start: int, end: int) -> bytes | None:
        chunk = self.hook.read_task_file_from(self.job_id, self.task_id, name, start, end)
        return None if chunk is None else chunk.data

    def _end(self, name: str, max_bytes: int) -> FileEnd | None:
        return self.hook.read_task_file_tail(self.job_id, self.task_id, name, max_bytes)


@dataclass
class NodeFiles(Files):
    """Another replica's: its subtask's directory on its node."""

    hook: AzureBatchHook
    pool_id: str
    node_id: str
    directory: str

    def _read(self, name: str, start: int, end: int) -> bytes:
        data = self.hook.client.download_node_file(
            self.pool_id, self.node_id, self._path(name), ocp_range=f"bytes={start}-{end}"
        )
        return b"".join(data)

    def _end(self, name: str, max_bytes: int) -> FileEnd | None:
        return self.hook.read_node_file_tail(self.pool_id, self.node_id, self._path(name), max_bytes)

    def _path(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}"


@dataclass
class BlobFiles(Files):
    """What was kept in the log container once the node is gone: the task's uploaded logs, or under them a
    replica's (``subdirectory``)."""

    hook: AzureBatchHook
    location: LogLocation
    job_id: str
    task_id: str
    subdirectory: str = ""
    kind = "blob"

    def _read(self, name: str, start: int, end: int) -> bytes:
        return self.hook.read_uploaded_log(self._where(), self.job_id, self.task_id, self._name(name), start, end)

    def _end(self, name: str, max_bytes: int) -> FileEnd | None:
        size = self.hook.get_uploaded_log_size(self._where(), self.job_id, self.task_id, self._name(name))
        if size is None:
            return None
        start = max(0, size - max_bytes)
        data = self._read(name, start, size - 1) if size else b""
        return FileEnd(data, whole=start == 0)

    def _where(self) -> dict[str, str]:
        return self.location.to_json()

    def _name(self, name: str) -> str:
        return f"{self.subdirectory}/{name}" if self.subdirectory else name


def read_whole(files: Files, name: str, limit: int = RECORD_BYTES) -> str | None:
    data = files.read(name, 0, limit - 1)
    return None if data is None else data.decode("utf-8", errors="replace")


def last_lines(files: Files | None, name: str, count: int) -> list[str]:
    """The last ``count`` lines of a file (none when it cannot be read), split as the watch splits output."""
    end = files.end(name) if files is not None else None
    return end.last_lines(count) if end is not None else []

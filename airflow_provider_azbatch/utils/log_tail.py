"""Following a Batch task's output files: one module for the synchronous operator and the trigger.

A cursor is the byte offset of the first byte not yet printed, plus the file's creation time (a new
file means the task started over, e.g. a retry). Each read asks for the file's size, then only the
bytes after the cursor (at most ``max_bytes``), and returns the complete lines in them. A partial
last line stays unread until it completes or the task ends, so nothing is printed twice and nothing
is lost across polls, deferrals and restarts; memory stays bounded by ``max_bytes``.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Protocol

from azure.core.exceptions import ResourceNotFoundError

STDOUT, STDERR = "stdout.txt", "stderr.txt"
STREAMS = (STDOUT, STDERR)
# A "line" longer than this (a progress bar without newlines) is printed in pieces.
MAX_LINE_BYTES = 64 * 1024
# Decoding more than this in the trigger goes to a worker thread, off the event loop.
OFFLOAD_BYTES = 64 * 1024


class LogFallback(Protocol):
    """Where a task's output can still be read once its node is gone (uploaded logs in Blob)."""

    def size(self, job_id: str, task_id: str, file_name: str) -> int | None: ...

    def read(self, job_id: str, task_id: str, file_name: str, start: int, end: int) -> bytes: ...


@dataclass
class StreamCursor:
    offset: int = 0
    created: str | None = None
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> StreamCursor:
        return cls(**data) if data else cls()


@dataclass
class TailResult:
    lines: list[str] = field(default_factory=list)
    cursor: StreamCursor = field(default_factory=StreamCursor)
    restarted: bool = False
    # The file is not there (not created yet, or the node that had it is gone).
    missing: bool = False


def split_lines(data: bytes, *, final: bool, max_line_bytes: int = MAX_LINE_BYTES) -> tuple[list[str], int]:
    """Complete lines in ``data`` (decoded, newline removed) and how many bytes they used.

    UTF-8 is decoded with replacement; lines are only ever cut at a newline (which never occurs
    inside a multi-byte character) or, for over-long lines, at a character boundary.
    """
    lines: list[str] = []
    position = 0
    length = len(data)
    while position < length:
        # +2: a line of exactly max_line_bytes may still be followed by "\r\n".
        newline = data.find(b"\n", position, position + max_line_bytes + 2)
        if newline != -1:
            lines.append(_decode(data[position:newline]))
            position = newline + 1
            continue
        remaining = length - position
        if remaining > max_line_bytes:
            cut = _char_boundary(data, position + max_line_bytes, position)
            lines.append(_decode(data[position:cut]))
            position = cut
            continue
        if final:
            lines.append(_decode(data[position:]))
            position = length
        break
    return lines, position


def _decode(raw: bytes) -> str:
    return raw.rstrip(b"\r").decode("utf-8", errors="replace")


def _char_boundary(data: bytes, cut: int, floor: int) -> int:
    """Move a cut left off UTF-8 continuation bytes, so a character is not split in two."""
    probe = cut
    while probe > floor + 1 and cut - probe < 4 and (data[probe] & 0xC0) == 0x80:
        probe -= 1
    return probe if probe > floor else cut


def _created_marker(value: datetime | str | None) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _plan(cursor: StreamCursor, size: int, created: str | None, max_bytes: int) -> tuple[StreamCursor, bool, int]:
    """(cursor to continue from, whether the file was recreated, end offset to read up to)."""
    restarted = (cursor.created is not None and created is not None and created != cursor.created) or (
        size < cursor.offset
    )
    start = StreamCursor(0, created) if restarted else StreamCursor(cursor.offset, created or cursor.created)
    return start, restarted, min(size, start.offset + max_bytes)


def _advance(start: StreamCursor, data: bytes, *, final: bool, at_end: bool) -> tuple[list[str], StreamCursor]:
    lines, used = split_lines(data, final=final and at_end)
    cursor = StreamCursor(start.offset + used, start.created, done=final and at_end and used == len(data))
    return lines, cursor


def tail_file(
    client: Any,
    job_id: str,
    task_id: str,
    file_path: str,
    cursor: StreamCursor,
    *,
    final: bool = False,
    max_bytes: int = 1024 * 1024,
    fallback: LogFallback | None = None,
) -> TailResult:
    """New complete lines of a task file (sync ``BatchClient``). ``final``: the task has ended.

    When the file is gone and the task has ended (its node left the pool), ``fallback`` (the logs the
    task uploaded to Blob) is read from the same position instead.
    """
    try:
        props = client.get_task_file_properties(job_id, task_id, file_path)
    except ResourceNotFoundError:
        if final and fallback is not None:
            return _tail_fallback(fallback, job_id, task_id, file_path, cursor, max_bytes)
        return TailResult(cursor=StreamCursor(cursor.offset, cursor.created, done=final), missing=True)
    start, restarted, end = _plan(cursor, props.content_length or 0, _created_marker(props.creation_time), max_bytes)
    if end <= start.offset:
        return TailResult(cursor=StreamCursor(start.offset, start.created, done=final), restarted=restarted)
    data = b"".join(client.download_task_file(job_id, task_id, file_path, ocp_range=f"bytes={start.offset}-{end - 1}"))
    lines, new_cursor = _advance(start, data, final=final, at_end=end >= (props.content_length or 0))
    return TailResult(lines, new_cursor, restarted)


def _tail_fallback(
    fallback: LogFallback, job_id: str, task_id: str, file_path: str, cursor: StreamCursor, max_bytes: int
) -> TailResult:
    size = fallback.size(job_id, task_id, file_path)
    if size is None:
        return TailResult(cursor=StreamCursor(cursor.offset, cursor.created, done=True), missing=True)
    start, restarted, end = _plan(cursor, size, cursor.created, max_bytes)
    if end <= start.offset:
        return TailResult(cursor=StreamCursor(start.offset, start.created, done=True), restarted=restarted)
    data = fallback.read(job_id, task_id, file_path, start.offset, end - 1)
    lines, new_cursor = _advance(start, data, final=True, at_end=end >= size)
    return TailResult(lines, new_cursor, restarted)


async def atail_file(
    client: Any,
    job_id: str,
    task_id: str,
    file_path: str,
    cursor: StreamCursor,
    *,
    final: bool = False,
    max_bytes: int = 1024 * 1024,
    fallback: Any = None,
) -> TailResult:
    """The same as :func:`tail_file` with the ``azure.batch.aio`` client; decoding stays off the loop.

    ``fallback`` here has coroutine ``size``/``read`` methods (``AsyncBlobLogReader``).
    """
    try:
        props = await client.get_task_file_properties(job_id, task_id, file_path)
    except ResourceNotFoundError:
        if final and fallback is not None:
            size = await fallback.size(job_id, task_id, file_path)
            if size is None:
                return TailResult(cursor=StreamCursor(cursor.offset, cursor.created, done=True), missing=True)
            start, restarted, end = _plan(cursor, size, cursor.created, max_bytes)
            if end <= start.offset:
                return TailResult(cursor=StreamCursor(start.offset, start.created, done=True), restarted=restarted)
            data = await fallback.read(job_id, task_id, file_path, start.offset, end - 1)
            lines, new_cursor = await _aadvance(start, data, final=True, at_end=end >= size)
            return TailResult(lines, new_cursor, restarted)
        return TailResult(cursor=StreamCursor(cursor.offset, cursor.created, done=final), missing=True)
    start, restarted, end = _plan(cursor, props.content_length or 0, _created_marker(props.creation_time), max_bytes)
    if end <= start.offset:
        return TailResult(cursor=StreamCursor(start.offset, start.created, done=final), restarted=restarted)
    stream = await client.download_task_file(job_id, task_id, file_path, ocp_range=f"bytes={start.offset}-{end - 1}")
    data = b"".join([chunk async for chunk in stream])
    lines, new_cursor = await _aadvance(start, data, final=final, at_end=end >= (props.content_length or 0))
    return TailResult(lines, new_cursor, restarted)


async def _aadvance(start: StreamCursor, data: bytes, *, final: bool, at_end: bool) -> tuple[list[str], StreamCursor]:
    if len(data) > OFFLOAD_BYTES:
        return await asyncio.to_thread(_advance, start, data, final=final, at_end=at_end)
    return _advance(start, data, final=final, at_end=at_end)


def last_lines(
    client: Any,
    job_id: str,
    task_id: str,
    file_path: str,
    count: int,
    max_bytes: int = 256 * 1024,
    fallback: LogFallback | None = None,
) -> list[str]:
    """The last ``count`` lines of a task file (for error messages), reading at most ``max_bytes``."""
    try:
        size = client.get_task_file_properties(job_id, task_id, file_path).content_length or 0
    except ResourceNotFoundError:
        if fallback is None:
            return []
        size = fallback.size(job_id, task_id, file_path) or 0
        if size == 0:
            return []
        start = max(0, size - max_bytes)
        return _last(fallback.read(job_id, task_id, file_path, start, size - 1), count, trimmed=start > 0)
    if size == 0:
        return []
    start = max(0, size - max_bytes)
    data = b"".join(client.download_task_file(job_id, task_id, file_path, ocp_range=f"bytes={start}-{size - 1}"))
    return _last(data, count, trimmed=start > 0)


def _last(data: bytes, count: int, *, trimmed: bool) -> list[str]:
    if trimmed and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]  # drop the partial first line of the window
    lines, _ = split_lines(data, final=True)
    return lines[-count:] if count > 0 else []

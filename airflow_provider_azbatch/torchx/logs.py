"""``torchx log``: a replica's stdout/stderr, from its node, or from Blob once the pool is gone.

Replica 0 of a role is its Batch task (or a multi-instance task's primary): its files are read where the
provider's command line reads them (:func:`airflow_provider_azbatch.cli.logs.locate`), from the node while it is
there and from the logs the job uploaded to Blob afterwards. Replica ``k > 0`` is subtask ``k``: its files are
on its node only. ``--tail`` (``should_tail``) follows the files until the task has ended and its output is
read to the end. Batch's output lines carry no time, so ``since``/``until`` select nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from airflow_provider_azbatch.cli.logs import Source, locate
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.watching.state import STDERR, STDOUT

# Bytes per read request.
CHUNK_BYTES = 4 * 1024 * 1024
POLL_SECONDS = 1.0


def replica_source(hook: Any, job_id: str, task_id: str, k: int, stream: str) -> Callable[[], Source | None]:
    """How to find the replica's file as it is now (None: not there, yet or any more)."""
    if k == 0:
        job = hook.get_job(job_id, select=["id", "metadata"])
        location = LogLocation.from_metadata(job.metadata) if job is not None else None
        return lambda: locate(hook, job_id, task_id, stream, location)[0]

    def on_node() -> Source | None:
        subtask = next((s for s in hook.list_subtasks(job_id, task_id) if s.id == k), None)
        info = getattr(subtask, "node_info", None)
        if info is None or not info.task_root_directory:
            return None
        pool, node = info.pool_id or "", info.node_id or ""
        path = f"{info.task_root_directory.rstrip('/')}/{stream}"
        try:
            size = hook.client.get_node_file_properties(pool, node, path).content_length or 0
        except Exception:  # the node (or the file) is gone
            return None

        def read(start: int, end: int) -> bytes | None:
            return b"".join(hook.client.download_node_file(pool, node, path, ocp_range=f"bytes={start}-{end}"))

        return Source(size, read)

    return on_node


def _task_ended(hook: Any, job_id: str, task_id: str, k: int) -> bool:
    task = hook.get_task(job_id, task_id, select=["id", "state"])
    if task is None or enum_value(task.state) == "completed":
        return True
    if k == 0:
        return False
    subtask = next((s for s in hook.list_subtasks(job_id, task_id) if s.id == k), None)
    return subtask is not None and enum_value(subtask.state) == "completed"


def read_lines(
    find: Callable[[], Source | None],
    ended: Callable[[], bool] | None,
    *,
    poll_seconds: float = POLL_SECONDS,
) -> Iterator[str]:
    """Every line of the file, each ending in a newline; with ``ended``, followed until that says so."""
    offset, pending = 0, b""
    while True:
        done = ended() if ended is not None else True  # asked first: the read after it gets all there is
        source = find()
        while source is not None and source.size > offset:
            data = source.read(offset, min(source.size, offset + CHUNK_BYTES) - 1)
            if not data:
                break
            offset += len(data)
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace") + "\n"
        if done:
            if pending:
                yield pending.decode("utf-8", errors="replace") + "\n"
            return
        time.sleep(poll_seconds)


def replica_lines(
    hook: Any,
    job_id: str,
    task_id: str,
    k: int,
    *,
    streams: str | None,
    regex: str | None,
    should_tail: bool,
) -> Iterator[str]:
    """The replica's lines: ``stdout``, ``stderr``, or both (stdout first; Batch keeps them apart)."""
    names = {"stdout": (STDOUT,), "stderr": (STDERR,)}.get(streams or "", (STDOUT, STDERR))
    pattern = re.compile(regex) if regex else None
    ended = (lambda: _task_ended(hook, job_id, task_id, k)) if should_tail else None
    for name in names:
        for line in read_lines(replica_source(hook, job_id, task_id, k, name), ended):
            if pattern is None or pattern.search(line):
                yield line

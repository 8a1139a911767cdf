"""Result files: JSON a task wrote in its working directory, read back once the job is over. No I/O.

A task's file is read from its node (``wd/<result_file>``); when the node is gone (an auto-pool deleted with
its job), from the copy uploaded beside the task's logs, if the job uploads them. Each file is at most
``max_bytes`` (``[azbatch] max_result_bytes``) and must hold one JSON value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.records import FileEnd
from airflow_provider_azbatch.submission.job import RESULT_FILES_DIR
from airflow_provider_azbatch.watching.calls import Step

# The working directory of a task, as the task file API names it.
WORKING_DIR = "wd"


class ResultFileError(Exception):
    """A result file that is missing, too large or not JSON; the message names the task and the file."""


def read_results(
    job_id: str,
    wanted: Mapping[str, str],
    *,
    max_bytes: int,
    log_location: dict[str, str] | None,
) -> Step[dict[str, Any]]:
    """The JSON value of each task's result file (``wanted``: task id -> path in its working directory)."""
    tasks = list(wanted)
    ends = yield [read.read_task_file_tail(job_id, t, f"{WORKING_DIR}/{wanted[t]}", max_bytes + 1) for t in tasks]
    found: dict[str, bytes] = {}
    gone: list[str] = []
    for task, end in zip(tasks, ends, strict=True):
        if isinstance(end, BaseException):
            raise end
        if end is None:
            gone.append(task)
        else:
            found[task] = _bounded(task, wanted[task], end, max_bytes)
    if gone and log_location:
        names = {task: f"{RESULT_FILES_DIR}/{wanted[task]}" for task in gone}
        sizes = yield [read.get_uploaded_log_size(log_location, job_id, t, names[t]) for t in gone]
        present = []
        for task, size in zip(gone, sizes, strict=True):
            if isinstance(size, BaseException):
                raise size
            if size is not None:
                if size > max_bytes:
                    raise _too_large(task, wanted[task], size, max_bytes)
                present.append((task, size))
        datas = yield [read.read_uploaded_log(log_location, job_id, t, names[t], 0, size - 1) for t, size in present]
        for (task, _), data in zip(present, datas, strict=True):
            if isinstance(data, BaseException):
                raise data
            found[task] = data
    missing = [task for task in tasks if task not in found]
    if missing:
        task = missing[0]
        where = "its working directory" + ("" if log_location else " (its node is gone, and the job uploads no logs)")
        raise ResultFileError(
            f"Batch task '{task}' of job {job_id} wrote no result file {wanted[task]!r} in {where}"
            + (f" (nor did {len(missing) - 1} other task(s))" if len(missing) > 1 else "")
        )
    return {task: _parsed(job_id, task, wanted[task], found[task]) for task in tasks}


def _bounded(task: str, path: str, end: FileEnd, max_bytes: int) -> bytes:
    if not end.whole or len(end.data) > max_bytes:
        raise _too_large(task, path, None, max_bytes)
    return end.data


def _too_large(task: str, path: str, size: int | None, max_bytes: int) -> ResultFileError:
    told = f" is {size:,} bytes" if size is not None else " is larger than that"
    return ResultFileError(
        f"Batch task '{task}' result file {path!r}{told}; at most {max_bytes:,} bytes are read back "
        "([azbatch] max_result_bytes): write large results to Blob (outputs=) and return where they are"
    )


def _parsed(job_id: str, task: str, path: str, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ResultFileError(
            f"Batch task '{task}' of job {job_id} wrote a result file {path!r} that is not JSON: {exc}"
        ) from None

"""The requests a watch step makes, as data: the core yields them, a driver answers them.

A step is a generator: it yields a list of :class:`Call` (made concurrently where the driver can) and
is sent back the list of results, each the hook method's return value or the exception it raised.
Every ``Call.method`` names a method of both hooks (:data:`READ_METHODS`): ``AzureBatchHook`` answers
them synchronously, ``AzureBatchAsyncHook`` as coroutines.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

# The read primitives every watch step is built from; both hooks implement each of them.
READ_METHODS = (
    "get_task_counts",
    "get_job_status",
    "list_task_states",
    "list_task_attempts",
    "list_task_files",
    "read_task_file",
    "read_task_file_from",
    "read_task_file_tail",
    "get_uploaded_log_size",
    "read_uploaded_log",
    "get_pool_snapshot",
    "list_nodes_in_states",
    "read_node_file_tail",
    "list_pool_nodes",
    "list_active_dependencies",
    "list_failed_tasks",
    "list_preparation_status",
)


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in READ_METHODS:
            raise ValueError(f"{self.method!r} is not a read primitive of the hooks")


# Yields batches of calls, receives their results, returns T.
Step = Generator[list[Call], list[Any], T]


def first_error(results: Sequence[Any]) -> BaseException | None:
    return next((result for result in results if isinstance(result, BaseException)), None)


def raise_first_error(results: Sequence[Any]) -> None:
    error = first_error(results)
    if error is not None:
        raise error


def ask(*calls: Call) -> Step[list[Any]]:
    """Make ``calls`` and return their results, raising the first error (all-or-nothing batches)."""
    results = yield list(calls)
    raise_first_error(results)
    return results

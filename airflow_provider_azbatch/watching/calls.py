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

# The read primitives every watch step is built from; both hooks implement each of them, and each is classed here,
# once, by what it is for.
# A needed read decides how the watch goes on: its failure is the watch's (retried through an outage, then the
# task fails with it).
NEEDED = (
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
    "list_active_dependencies",
    "list_failed_tasks",
    "list_preparation_status",
)
# An informing read only adds to what the task reports: its pool's nodes (idle time, cost, the pool pulse), the
# pool's health (a pool that cannot give nodes told apart from a busy one), a node's logs. Its failure comes back as
# a :class:`Gap`, which the task's log names once (:mod:`.gaps`): it never fails the task.
INFORMING = (
    "get_pool_snapshot",
    "list_nodes_in_states",
    "read_node_file_tail",
    "list_pool_nodes",
)
READ_METHODS = NEEDED + INFORMING


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in READ_METHODS:
            raise ValueError(f"{self.method!r} is not a read primitive of the hooks")

    @property
    def informing(self) -> bool:
        """Whether the read only informs (see ``INFORMING``): a failure of it does not fail the watch."""
        return self.method in INFORMING


@dataclass(frozen=True)
class Gap:
    """An informing read that did not answer: the call, and why (``error`` None: what it reads is gone, 404)."""

    call: Call
    error: BaseException | None


# Yields batches of calls, receives their results, returns T.
Step = Generator[list[Call], list[Any], T]


def first_error(results: Sequence[Any]) -> BaseException | None:
    return next((result for result in results if isinstance(result, BaseException)), None)


def raise_first_error(results: Sequence[Any]) -> None:
    error = first_error(results)
    if error is not None:
        raise error


def ask(*calls: Call) -> Step[list[Any]]:
    """Make ``calls`` and return their results, raising the first error of a needed read (all-or-nothing batches);
    an informing read that failed comes back as a :class:`Gap`."""
    results = yield list(calls)
    raise_first_error([result for call, result in zip(calls, results, strict=True) if not call.informing])
    return [
        Gap(call, result) if call.informing and isinstance(result, BaseException) else result
        for call, result in zip(calls, results, strict=True)
    ]

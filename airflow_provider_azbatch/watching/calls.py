"""The requests a watch step makes, as data: the core yields them, a driver answers them.

A step is a generator: it yields a list of :class:`~airflow_provider_azbatch.model.reads.Call` (made
concurrently where the driver can) and is sent back the list of results, each the read's return value or the
exception it raised. Every call is one of the reads both hooks answer (:mod:`airflow_provider_azbatch.model.reads`):
``AzureBatchHook`` synchronously, ``AzureBatchAsyncHook`` as coroutines.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_provider_azbatch.model.reads import BatchReads, Call

T = TypeVar("T")

# The reads every watch step is built from, each classed here, once, by what it is for.
READ_METHODS = tuple(name for name in vars(BatchReads) if not name.startswith("_"))
# An informing read only adds to what the task reports: its pool's nodes (idle time, cost, the pool listings), the
# pool's health (a pool that cannot give nodes told apart from a busy one), a node's logs. Its failure comes back as
# a :class:`Gap`, which the task's log names once (:mod:`.gaps`): it never fails the task.
INFORMING = (
    "get_pool_snapshot",
    "list_nodes_in_states",
    "read_node_file_tail",
    "list_pool_nodes",
)
# A needed read decides how the watch goes on: its failure is the watch's (retried through an outage, then the
# task fails with it).
NEEDED = tuple(name for name in READ_METHODS if name not in INFORMING)

# Yields batches of calls, receives their results, returns T.
Step = Generator[list[Call[Any]], list[Any], T]


def informing(call: Call[Any]) -> bool:
    """Whether the read only informs (see ``INFORMING``): a failure of it does not fail the watch."""
    return call.name in INFORMING


@dataclass(frozen=True)
class Gap:
    """An informing read that did not answer: the call, and why (``error`` None: what it reads is gone, 404)."""

    call: Call[Any]
    error: BaseException | None


def first_error(results: Sequence[Any]) -> BaseException | None:
    return next((result for result in results if isinstance(result, BaseException)), None)


def raise_first_error(results: Sequence[Any]) -> None:
    error = first_error(results)
    if error is not None:
        raise error


def ask(*calls: Call[Any]) -> Step[list[Any]]:
    """Make ``calls`` and return their results, raising the first error of a needed read (all-or-nothing batches);
    an informing read that failed comes back as a :class:`Gap`."""
    results = yield list(calls)
    raise_first_error([result for call, result in zip(calls, results, strict=True) if not informing(call)])
    return [
        Gap(call, result) if informing(call) and isinstance(result, BaseException) else result
        for call, result in zip(calls, results, strict=True)
    ]

"""The requests a watch step makes, as data: the core yields them, a driver answers them.

A step is a generator: it yields a list of :class:`~airflow_provider_azbatch.model.reads.Call` (made
concurrently where the driver can) and is sent back the list of results, each the read's return value or the
exception it raised. Every call is one of the reads both hooks answer (:mod:`airflow_provider_azbatch.model.reads`):
``AzureBatchHook`` synchronously, ``AzureBatchAsyncHook`` as coroutines.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, TypeVar

from airflow_provider_azbatch.model.reads import Call

T = TypeVar("T")

# Yields batches of calls, receives their results, returns T.
Step = Generator[list[Call[Any]], list[Any], T]


def first_error(results: Sequence[Any]) -> BaseException | None:
    return next((result for result in results if isinstance(result, BaseException)), None)


def raise_first_error(results: Sequence[Any]) -> None:
    error = first_error(results)
    if error is not None:
        raise error


def ask(*calls: Call[Any]) -> Step[list[Any]]:
    """Make ``calls`` and return their results, raising the first error (all-or-nothing batches)."""
    results = yield list(calls)
    raise_first_error(results)
    return results

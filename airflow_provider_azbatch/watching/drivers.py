"""Run a watch step against a hook: one small driver for the worker, one for the triggerer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.model.reads import AsyncBatchReads, BatchReads, Call
from airflow_provider_azbatch.watching.calls import Step, T

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook

    def _hooks_answer_the_reads(hook: AzureBatchHook, async_hook: AzureBatchAsyncHook) -> list[object]:
        """Not called: mypy proves here that each hook implements its Protocol of the reads."""
        reads: BatchReads = hook
        async_reads: AsyncBatchReads = async_hook
        return [reads, async_reads]


def run_sync(step: Step[T], hook: BatchReads) -> T:
    """Answer the step's calls one after the other with the sync ``AzureBatchHook``."""
    try:
        calls = next(step)
        while True:
            calls = step.send([_call(hook, call) for call in calls])
    except StopIteration as stop:
        result: T = stop.value
        return result


def _call(hook: BatchReads, call: Call[Any]) -> Any:
    try:
        return call.sync(hook)
    except Exception as exc:  # the step decides what an error means
        return exc


async def run_async(step: Step[T], hook: AsyncBatchReads, limit: asyncio.Semaphore | None = None) -> T:
    """Answer each batch of the step's calls concurrently with ``AzureBatchAsyncHook`` (``limit`` bounds it)."""

    async def answer(call: Call[Any]) -> Any:
        try:
            if limit is None:
                return await call.asynchronous(hook)
            async with limit:
                return await call.asynchronous(hook)
        except Exception as exc:
            return exc

    try:
        calls = next(step)
        while True:
            if len(calls) == 1:  # most batches (a watch-only poll is one): no task, context or future for it
                results = [await answer(calls[0])]
            else:
                results = list(await asyncio.gather(*(answer(call) for call in calls)))
            calls = step.send(results)
    except StopIteration as stop:
        result: T = stop.value
        return result

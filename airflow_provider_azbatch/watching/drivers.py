"""Run a watch step against a hook: one small driver for the worker, one for the triggerer."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_provider_azbatch.watching.calls import Call, Step, T


def run_sync(step: Step[T], hook: Any) -> T:
    """Answer the step's calls one after the other with the sync ``AzureBatchHook``."""
    try:
        calls = next(step)
        while True:
            calls = step.send([_call(hook, call) for call in calls])
    except StopIteration as stop:
        return stop.value


def _call(hook: Any, call: Call) -> Any:
    try:
        return getattr(hook, call.method)(*call.args)
    except Exception as exc:  # the step decides what an error means
        return exc


async def run_async(step: Step[T], hook: Any, limit: asyncio.Semaphore | None = None) -> T:
    """Answer each batch of the step's calls concurrently with ``AzureBatchAsyncHook`` (``limit`` bounds it)."""

    async def answer(call: Call) -> Any:
        try:
            if limit is None:
                return await getattr(hook, call.method)(*call.args)
            async with limit:
                return await getattr(hook, call.method)(*call.args)
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
        return stop.value

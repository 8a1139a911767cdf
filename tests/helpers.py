"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


async def wait_until_async(check: Callable[[], T], timeout: float = 30.0, what: str = "condition") -> T:
    """``wait_until`` from a coroutine: polls in a thread, so the event loop under test keeps running."""
    return await asyncio.to_thread(wait_until, check, timeout, 0.1, what)


def sh(script: str) -> str:
    """A command line running ``script`` under a shell, as a Batch user writes one (the service runs none)."""
    return "/bin/sh -c " + shlex.quote(script)


def pool_options(pool_id: str, nodes: int = 1, slots: int = 1, **extra: object) -> object:
    """A fixed pool of Ubuntu nodes, as the azure-batch SDK creates one."""
    from azure.batch import models as m

    return m.BatchPoolCreateOptions(
        id=pool_id,
        vm_size="standard_d2s_v3",
        virtual_machine_configuration=m.VirtualMachineConfiguration(
            image_reference=m.BatchVmImageReference(
                publisher="canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts"
            ),
            node_agent_sku_id="batch.node.ubuntu 22.04",
        ),
        target_dedicated_nodes=nodes,
        task_slots_per_node=slots,
        **extra,
    )


class BackgroundTrigger:
    """A trigger run in an event loop of its own (a triggerer's), while the test reads the service's log; the event
    it fired, if it fired before the test ended it, in ``events``."""

    def __init__(self, trigger: Any) -> None:
        self.trigger = trigger
        self.events: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()))

    async def _run(self) -> None:
        run = asyncio.ensure_future(anext(self.trigger.run()))
        while not self._stop.is_set() and not run.done():
            await asyncio.sleep(0.05)
        if run.done():
            with contextlib.suppress(StopAsyncIteration):  # a trigger that ended without an event fired none
                self.events.append(run.result().payload)
            return
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await run

    def __enter__(self) -> BackgroundTrigger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

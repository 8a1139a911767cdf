"""Checkpoints: where a trigger's watch got to, kept in XCom (``azbatch_watch_state``) for a trigger that restarts.

Every line is printed once: the read position of each stream travels in the trigger's kwargs and events, and is
checkpointed in the background, at most every ``[azbatch] checkpoint_interval`` seconds and only when it moved. A
restarted or redistributed trigger resumes from the last checkpoint; lines shown after it and before a crash are
shown again (at most one checkpoint interval's worth), none is lost.

Reading a checkpoint through a freshly started triggerer takes seconds (measured 5-8 s on Airflow 3.3.2, against
60 ms in a warm one), so a trigger must not wait for one before its first poll when none can exist: no checkpoint
is written during the first ``FRESH_SECONDS`` after the task deferred, and a trigger starting within them begins
from its kwargs at once. The price: a triggerer restart within those first seconds shows their output again.

Best effort throughout: a triggerer without XCom access starts from the kwargs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from airflow_provider_azbatch.compat import aget_xcom, aset_xcom

CHECKPOINT_KEY = "azbatch_watch_state"
# No checkpoint is written this soon after the task deferred, so a trigger starting within it reads none.
FRESH_SECONDS = 10.0
# How long a cancelled trigger (triggerer shutdown) may take to write its last checkpoint.
FINAL_CHECKPOINT_SECONDS = 5.0


class Logger(Protocol):
    """A trigger's log (``BaseTrigger.log``: a standard logger, or Airflow's structlog one)."""

    def debug(self, event: Any, *args: Any) -> Any: ...
    def info(self, event: Any, *args: Any) -> Any: ...
    def warning(self, event: Any, *args: Any) -> Any: ...


class Checkpoints:
    """Writes the latest watch state in the background: at most once per ``interval``, only when it moved,
    never before ``not_before`` (epoch seconds), never on the poll's path.

    Nor when the watch has not polled for ``max_age`` seconds: it was stalled, and another trigger may have
    taken the job over and checkpointed further since (writing this state would take that back).
    """

    def __init__(
        self,
        write: Callable[[dict[str, Any]], Awaitable[None]],
        interval: float,
        not_before: float,
        max_age: float | None = None,
    ) -> None:
        self._write = write
        self.interval = interval
        self.not_before = not_before
        self.max_age = max_age
        self._written: dict[str, Any] | None = None
        self._latest: dict[str, Any] | None = None
        self._next_at = not_before
        self._offered_at = time.time()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.writes = 0

    def offer(self, state: dict[str, Any], written: bool = False) -> None:
        """The watch's state after a poll (every poll offers it, moved or not)."""
        self._offered_at = time.time()
        if written:  # stored already: what the watch started from, or caught up with
            self._written = self._latest = state
            return
        if state == self._written:
            return
        self._latest = state
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            delay = self._next_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._write_latest()

    async def _write_latest(self) -> bool:
        state = self._latest
        if state is None or state == self._written or time.time() < self.not_before:
            return False
        if self.max_age is not None and time.time() - self._offered_at > self.max_age:
            return False
        self._next_at = time.time() + self.interval
        await self._write(state)
        self._written = state
        self.writes += 1
        return True

    async def close(self, *, final: bool) -> bool | None:
        """Stop; with ``final``, write what moved since the last write first (bounded in time).

        Whether the triggerer answered that write: False when it did not in time (a stopping triggerer answers
        nothing more); None when nothing was written."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if not final:
            return None
        try:
            wrote = await asyncio.wait_for(self._write_latest(), FINAL_CHECKPOINT_SECONDS)
        except asyncio.TimeoutError:
            return False
        except Exception:
            return True  # answered, with an error: best effort, as every write
        return True if wrote else None


async def answers(read: Callable[[], Awaitable[object]]) -> bool:
    """Whether the triggerer answers a read (``read`` swallows its errors) within ``FINAL_CHECKPOINT_SECONDS``."""
    try:
        await asyncio.wait_for(read(), FINAL_CHECKPOINT_SECONDS)
    except asyncio.TimeoutError:
        return False
    return True


async def read_checkpoint(where: dict[str, Any] | None, job_id: str, log: Logger) -> dict[str, Any] | None:
    """The checkpoint of the task instance at ``where`` (None: no task instance), if it is ``job_id``'s."""
    saved = await read_xcom(aget_xcom, CHECKPOINT_KEY, where, log, "No checkpoint read (%s)")
    return saved if isinstance(saved, dict) and saved.get("job_id") == job_id else None


async def read_xcom(
    get: Callable[..., Awaitable[Any]], key: str, where: dict[str, Any] | None, log: Logger, unread: str
) -> Any:
    """An XCom value of the task instance at ``where`` (None: no task instance, or none read: ``unread`` says
    why in the debug log)."""
    if where is None:
        return None
    try:
        return await get(key, **where)
    except Exception as exc:
        log.debug(unread, exc)
        return None


async def write_checkpoint(where: dict[str, Any] | None, state: dict[str, Any], log: Logger) -> None:
    if where is None:
        return
    try:
        await aset_xcom(CHECKPOINT_KEY, state, **where)
    except Exception as exc:
        log.debug("Checkpoint not written (%s)", exc)


async def starting_state(
    kwargs_state: dict[str, Any],
    not_before: float,
    read: Callable[[], Awaitable[dict[str, Any] | None]],
    log: Logger,
) -> dict[str, Any]:
    """The kwargs' state, or a newer checkpoint. None can exist before ``not_before``: no read then."""
    if time.time() < not_before:
        return kwargs_state
    saved = await read()
    if saved is None:
        return kwargs_state
    log.info("Resuming Batch job %s output from the last checkpoint", kwargs_state["job_id"])
    return saved

"""Standing by for, and taking over from, another triggerer that was handed the same job.

With several triggerers, Airflow hands the triggers of one whose heartbeat lapsed for
``[triggerer] triggerer_health_check_threshold`` to another, even when it is still alive (stalled, paused, cut off
from the database), and cancels them there once it looks at the database again. So:

- A trigger that comes back from a stall as long as half that threshold waits ``STALL_SETTLE_SECONDS`` (for
  Airflow to cancel it, if it was handed over) and reads the checkpoint before its next poll. If another trigger
  wrote one that shows every stream further, the job was handed over: the trigger stands by, polling and showing
  nothing, until Airflow cancels it. Airflow does so at the triggerer's next look at the database, but the
  triggerer's runner learns of it only through the same channel that serves every trigger's XCom reads and
  writes, one at a time: seconds to tens of seconds after a stall, when all of its triggers read their checkpoints
  at once. Standing by, the trigger shows nothing twice however long that takes. Should Airflow give the trigger
  back instead (the other triggerer lost too), it continues from the latest checkpoint after
  ``STAND_BY_FRACTION`` times the threshold.
- A poll that took that long (one in flight when the triggerer froze, or a slow answer) shows what it read only
  once the checkpoint says that no other trigger took the job over meanwhile: otherwise that one showed it
  already, and this one stands by as above.

A user's kill, told apart from such a move, is :mod:`.kill`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow_provider_azbatch.triggers.checkpoints import Logger

# A poll this late (a fraction of [triggerer] triggerer_health_check_threshold) looks whether another trigger
# took the job over meanwhile.
STALL_FRACTION = 0.5
# How long a trigger back from such a stall waits before it reads the checkpoint and polls again.
STALL_SETTLE_SECONDS = 5.0
# How long a trigger that found its job handed over stands by for Airflow to cancel it (times the health-check
# threshold) before it goes on from the latest checkpoint.
STAND_BY_FRACTION = 2.0

ReadCheckpoint = Callable[[], Awaitable[dict[str, Any] | None]]
StandBy = Callable[[WatchState, float], Awaitable[WatchState]]


def health_check_threshold() -> float:
    """``[triggerer] triggerer_health_check_threshold``: how long a triggerer's heartbeat may lapse before
    Airflow hands its triggers to another one."""
    try:
        from airflow.sdk import conf

        return conf.getfloat("triggerer", "triggerer_health_check_threshold", fallback=30.0)
    except Exception:  # outside an Airflow installation, or an unreadable value: Airflow's default
        return 30.0


def stall_seconds() -> float:
    """How late a poll is when it may have spanned a handover."""
    return STALL_FRACTION * health_check_threshold()


async def after_stall(read: ReadCheckpoint, stand_by: StandBy, shown: WatchState, late: float) -> WatchState | None:
    """After a stall: the checkpoint to go on from if another trigger took the job over meanwhile (it showed
    every stream further than ``shown``), once this one has stood by; None if none did."""
    # Give Airflow a moment to cancel this trigger if it was handed over, and the other trigger one to
    # checkpoint, before reading what that one showed.
    await asyncio.sleep(STALL_SETTLE_SECONDS)
    taken_over = await checkpoint_past(read, shown)
    if taken_over is None:
        return None
    return await stand_by(taken_over, late)


async def checkpoint_past(read: ReadCheckpoint, state: WatchState) -> WatchState | None:
    """After a stall: the checkpoint, if another trigger (the one Airflow handed the job to meanwhile) wrote
    one showing every stream further than ``state``."""
    saved = await read()
    if saved is None:
        return None
    theirs = WatchState.from_json(saved)
    if not theirs.shown_past(state):
        return None
    return theirs


async def stand_by(read: ReadCheckpoint, log: Logger, theirs: WatchState, late: float) -> WatchState:
    """The job was handed to another trigger while this one stalled: poll and show nothing until Airflow
    cancels this one; if it has not after the bound (the job came back to this triggerer), the latest
    checkpoint to go on from."""
    bound = STAND_BY_FRACTION * health_check_threshold()
    log.info(
        "This triggerer stalled for %.0f s and another one showed Batch job %s output meanwhile: standing by "
        "until Airflow cancels this trigger (at most %.0f s)",
        late,
        theirs.job_id,
        bound,
    )
    await asyncio.sleep(bound)
    newest = await checkpoint_past(read, theirs)
    log.info(
        "Batch job %s: this trigger was not cancelled within %.0f s (the job is this triggerer's again): "
        "continuing from the latest checkpoint",
        theirs.job_id,
        bound,
    )
    return newest or theirs

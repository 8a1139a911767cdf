"""A deferred trigger's place in its account view: when it looks at its own job, and what wakes it between looks.

The words are defined once in docs/explanation/account-view.md#glossary: a **look** (a trigger's own read of its
job: task counts and what they lead to), its **pace** (``LOOKS_PER_SECOND`` for a triggerer: first looks and the
looks a pool listing asks for), its **cadence** (how long after a look the next one is: :func:`look_after`), a
job that **rests** on its pool's listing (:mod:`.pool_nodes`).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from typing import TYPE_CHECKING

from airflow_provider_azbatch.model.records import JobChange
from airflow_provider_azbatch.triggers.output_reads import Reader
from airflow_provider_azbatch.watching.core import JobWatcher

if TYPE_CHECKING:
    from airflow_provider_azbatch.triggers.account_view import AccountView

# A job's own looks back off to at most this far apart (a waiting job's too).
MAX_LOOK_SECONDS = 60.0
# Looks a triggerer makes a second at most that no change of the job asked for: first looks, and the looks a pool
# listing asks for (a triggerer that starts with thousands of jobs looks at them over seconds, not at once).
LOOKS_PER_SECOND = 100.0


class Subscription:
    """One deferred trigger's place in a view: told when its job changed, woken when output reads were granted or
    its pool's listing asks it to look."""

    def __init__(self, view: AccountView, job_id: str, poll_interval: float) -> None:
        self.view = view
        self.job_id = job_id
        self.poll_interval = poll_interval
        self.changed = False
        self.last_change: JobChange | None = None  # the last change of the job the view listed
        self._waiter: asyncio.Future[None] | None = None
        self.reads: Reader = view.output_reads().reader(self._wake)
        self.resting_on: str | None = None  # the pool whose listing it rests on
        self.look_request: float | None = None  # when its pool's listing asked it to look (paced), if it did

    def notify(self, change: JobChange | None = None) -> None:
        """The job changed (``change``, as listed; None: look at it anyway, e.g. the view failed for good)."""
        self.changed = True
        self.last_change = change
        self._wake()

    def look_soon(self) -> None:
        """Its pool's listing saw the job's tasks move (or can no longer tell): look at the job, paced."""
        self.resting_on = None
        if self.look_request is None:
            self.look_request = look_slot(time.time())
        self._wake()

    def take_look_request(self) -> float | None:
        """When the pool's listing asked for a look at the job (None: it did not since the last call)."""
        requested, self.look_request = self.look_request, None
        return requested

    def rest(self, pool_id: str, looked_at: float) -> float | None:
        """The look that started at ``looked_at`` found nothing moving: how long the job may go without looking at
        itself, resting on ``pool_id``'s listing (None: the listing does not cover it; it backs off)."""
        if self.resting_on not in (None, pool_id):
            self.stop_resting()
        self.resting_on = pool_id
        return self.view.pools.rest(self, pool_id, looked_at)

    def stop_resting(self) -> None:
        pool_id, self.resting_on = self.resting_on, None
        if pool_id is not None:
            self.view.pools.stop_resting(self, pool_id)

    def _wake(self) -> None:
        """Wake the trigger without a change of its job."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> bool:
        """Wait until the job changed, reads were granted, its pool's listing asked for a look, or ``timeout``
        seconds passed; whether it changed."""
        if not self.changed and not self.reads.granted and self.look_request is None and timeout > 0:
            loop = asyncio.get_running_loop()
            # One future and one timer handle: a waiting trigger costs no task.
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, _release, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        changed, self.changed = self.changed, False
        return changed

    def job_look_interval(self) -> float:
        """The shortest time between two of its own looks (the poll interval for a few jobs, further apart for
        many: ``[azbatch] job_looks_per_second`` for the account)."""
        return self.view.job_look_interval(self.poll_interval)

    def first_look_at(self, now: float) -> float:
        """When this trigger may first look at its job (epoch seconds; see ``LOOKS_PER_SECOND``)."""
        return look_slot(now)

    @property
    def watching(self) -> bool:
        """Whether the view's last look answered: it reports the job's state changes."""
        return self.view.healthy

    async def close(self) -> None:
        self.reads.close()
        self.stop_resting()
        await self.view.unsubscribe(self)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_slots: dict[int, float] = {}  # event loop -> when its next paced look may be (epoch seconds)


def look_slot(now: float) -> float:
    """A time for a paced look, ``1 / LOOKS_PER_SECOND`` after the one before in this event loop."""
    loop_id = id(asyncio.get_running_loop())
    slot = max(now, _slots.get(loop_id, 0.0))
    _slots[loop_id] = slot + 1.0 / LOOKS_PER_SECOND
    return slot


class OwnLooks:
    """No view (``[azbatch] account_view = False``): the trigger looks at its own job every poll."""

    def __init__(self, poll_interval: float) -> None:
        self.poll_interval = poll_interval

    async def wait(self, timeout: float) -> bool:
        if timeout > 0:
            await asyncio.sleep(timeout)
        return False

    def job_look_interval(self) -> float:
        return self.poll_interval

    def first_look_at(self, now: float) -> float:
        return now

    @property
    def watching(self) -> bool:
        return False

    async def close(self) -> None:
        return None


def look_after(subscription: Subscription | OwnLooks, watcher: JobWatcher, every: float, looked_at: float) -> float:
    """The cadence: how long after the look that started at ``looked_at`` the next one is, ``every`` seconds
    after the one before (the view reports the job's state changes meanwhile).

    The shortest interval while the counts move, streamed tasks run (a streamed task's end must be seen before its
    node goes) or the view cannot list the account; else the job rests on its pool's listing where that covers
    it (:mod:`.pool_nodes`: between one and two ``REST_LOOK_SECONDS``, a point of its own), or backs off: twice as
    long as before, at most ``MAX_LOOK_SECONDS`` (a job whose tasks wait for nodes too)."""
    shortest = subscription.job_look_interval()
    if not isinstance(subscription, Subscription):
        return shortest
    if not subscription.watching or watcher.last_look_moved or watcher.following():
        subscription.stop_resting()
        return shortest
    pool_id = watcher.state.pool_id
    # A Spot job's fallback is due by time, not by what its nodes show: it backs off, but never rests.
    if pool_id is not None and watcher.state.spot is None:
        rest = subscription.rest(pool_id, looked_at)
        if rest is not None:
            # Each job at its own point of the next rest: jobs that began to rest together do not look together.
            return rest * (1.0 + zlib.crc32(subscription.job_id.encode()) / 2**32)
    else:
        subscription.stop_resting()
    return min(MAX_LOOK_SECONDS, max(shortest, 2 * every))

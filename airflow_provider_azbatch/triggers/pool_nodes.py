"""A pool's nodes, listed once for every deferred job of a triggerer on it (the account view's pools).

Each job samples its pool's nodes for what their idle time costs (:mod:`~airflow_provider_azbatch.watching.idle_time`),
at its first look and every minute after. Listed by each job, a thousand jobs on a pool would list it a thousand
times at a triggerer's start. Instead the account view keeps one **pool listing** per pool: a job that wants the
pool's nodes gets the last listing if it is at most ``LISTING_SECONDS`` old, waits for the one in flight, or starts
one; so a pool is listed at most once every ``LISTING_SECONDS`` per triggerer, whatever the number of its jobs, at
start-up too.

**Failures back off, per pool, never per job.** A listing refused (403: the credential's role does not read the
pool's nodes) or answered "gone" (404) is not tried again for ``2 ** failures x LISTING_SECONDS`` seconds, at most
``FAILED_LISTING_SECONDS``: the jobs that ask meanwhile get the same answer without a request. A job's watch takes
such an answer as a gap in what it reports, never as its own failure (:mod:`~airflow_provider_azbatch.watching.calls`).

**The pulse.** Each listing is compared with the one before (:func:`jobs_moved`): a task that starts or ends
changes its node (its running tasks, the tasks it ran, its ``recentTasks``, which name each task's job). A job whose
look found nothing moving **rests** on its pool's listing: it looks at itself only when a listing names it (or
names no job where tasks changed), and otherwise every ``REST_LOOK_SECONDS``. While at least ``PULSE_MIN_JOBS`` jobs
rest on a pool, the view lists it every ``LISTING_SECONDS`` (or its poll interval, if longer) whether or not a
job asks: that is the pulse. It costs what ``PULSE_MIN_JOBS`` jobs' own looks a ``MAX_LOOK_SECONDS`` apart cost;
fewer jobs look at themselves, backing off. Comparing a listing costs time in proportion to its nodes and the
jobs they name, not to the jobs that rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from airflow_provider_azbatch.model.records import NodeTimes
from airflow_provider_azbatch.triggers.subscription import MAX_LOOK_SECONDS

# A pool's nodes are listed at most this often per triggerer; the pulse lists them this often.
LISTING_SECONDS = 5.0
# A failed listing is tried again 2, 4, 8... times LISTING_SECONDS later, at most this long after.
FAILED_LISTING_SECONDS = 60.0
# The pulse runs for a pool once this many jobs rest on it: then it costs no more than their own looks.
PULSE_MIN_JOBS = round(MAX_LOOK_SECONDS / LISTING_SECONDS)
# A job resting on its pool's listing still looks at itself this often, for what no node shows (a task terminated
# before it started, a busy node's recentTasks that no longer name the job).
REST_LOOK_SECONDS = 600.0


class Resting(Protocol):
    """A deferred trigger's subscription, as its pool's listing sees it."""

    job_id: str

    def look_soon(self) -> None: ...


class Lister(Protocol):
    async def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None: ...


def _key(node: NodeTimes) -> tuple[Any, ...]:
    return (node.running_tasks, node.tasks_run, node.state, node.recent_jobs)


def jobs_moved(before: dict[str, NodeTimes], after: Iterable[NodeTimes] | None) -> set[str] | None:
    """The jobs whose tasks may have started or ended on a pool between two listings of its nodes (``before`` by
    node id; ``after`` None: the pool is gone). None: which jobs cannot be told (a node whose tasks changed names no
    job, or the pool went): any job of the pool's."""
    if after is None:
        return None
    seen: set[str] = set()
    moved: set[str] = set()
    for node in after:
        seen.add(node.id)
        previous = before.get(node.id)
        if previous is None:  # a new node: what it runs already (nothing, mostly) started since
            if node.running_tasks or node.tasks_run:
                if not node.recent_jobs:
                    return None
                moved.update(node.recent_jobs)
            continue
        if _key(previous) == _key(node):
            continue
        named = {*previous.recent_jobs, *node.recent_jobs}
        if not named:  # its tasks or its state changed (unusable, say), and no job to tell: all look
            return None
        moved.update(named)
    for node_id, gone in before.items():  # its running tasks go back to their jobs' queues
        if node_id not in seen and gone.running_tasks:
            if not gone.recent_jobs:
                return None
            moved.update(gone.recent_jobs)
    return moved


class PoolListing:
    """One pool's listing: the last nodes listed, the listing in flight, its failures and the jobs resting on it."""

    def __init__(self, pool_id: str) -> None:
        self.pool_id = pool_id
        self.nodes: dict[str, NodeTimes] | None = None  # by id, as last listed (None: not yet, or the pool is gone)
        self.listed_at: float | None = None  # when the last answer came (epoch seconds)
        self.failures = 0  # failed listings in a row (an answer "gone" counts)
        self.error: BaseException | None = None  # the last failure's
        self.retry_at = 0.0
        self.in_flight: asyncio.Future[list[NodeTimes] | None] | None = None
        # job id -> its subscriptions resting here, each with whether the pulse covers it (it rests for
        # REST_LOOK_SECONDS, not backing off on its own)
        self.resting: dict[str, dict[Resting, bool]] = {}
        self.rested = 0
        self.covered = 0

    def fresh(self, now: float) -> bool:
        return self.listed_at is not None and self.failures == 0 and now - self.listed_at < LISTING_SECONDS

    def answer(self) -> list[NodeTimes] | None:
        """The last listing's answer: its nodes, or None (gone); raises the error it failed with."""
        if self.error is not None:
            raise self.error
        return None if self.nodes is None else list(self.nodes.values())


class PoolListings:
    """The pool listings of one account view (see the module docstring)."""

    def __init__(self) -> None:
        self._pools: dict[str, PoolListing] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def pool(self, pool_id: str) -> PoolListing:
        pool = self._pools.get(pool_id)
        if pool is None:
            pool = self._pools[pool_id] = PoolListing(pool_id)
        return pool

    async def nodes(self, pool_id: str, lister: Lister) -> list[NodeTimes] | None:
        """The pool's nodes (None: the pool is gone), listed at most once per ``LISTING_SECONDS`` for all who ask;
        raises what the last listing failed with while it backs off."""
        pool = self.pool(pool_id)
        now = time.time()
        if pool.in_flight is None and (pool.fresh(now) or (pool.failures and now < pool.retry_at)):
            return pool.answer()
        future = pool.in_flight or self._start(pool, lister)
        return await asyncio.shield(future)

    def _start(self, pool: PoolListing, lister: Lister) -> asyncio.Future[list[NodeTimes] | None]:
        """A listing of its own (a task): a trigger that waits for it and is cancelled does not cancel it."""
        task = asyncio.ensure_future(self._list(pool, lister))
        pool.in_flight = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_consume)
        return task

    async def _list(self, pool: PoolListing, lister: Lister) -> list[NodeTimes] | None:
        try:
            nodes = await lister.list_pool_nodes(pool.pool_id)
        except Exception as exc:
            self._failed(pool, exc, time.time())
            raise
        finally:
            pool.in_flight = None
        self.observe(pool, nodes, time.time())
        return nodes

    def observe(self, pool: PoolListing, nodes: list[NodeTimes] | None, now: float) -> None:
        """A listing answered (None: the pool is gone): tell the resting jobs it names to look."""
        before = pool.nodes
        pool.listed_at = now
        if nodes is None:
            self._failed(pool, None, now)
            pool.nodes = None
            self._all_look(pool)
            return
        pool.failures, pool.error = 0, None
        pool.nodes = {node.id: node for node in nodes}
        if before is None or not pool.resting:
            return  # the first: what the jobs saw at their last look is no older than it
        moved = jobs_moved(before, nodes)
        if moved is None:
            self._all_look(pool)
            return
        for job_id in moved:
            for subscription, covered in list(pool.resting.pop(job_id, {}).items()):
                pool.rested -= 1
                pool.covered -= covered
                subscription.look_soon()

    def _failed(self, pool: PoolListing, error: BaseException | None, now: float) -> None:
        pool.failures += 1
        pool.error = error
        pool.retry_at = now + min(FAILED_LISTING_SECONDS, LISTING_SECONDS * 2**pool.failures)
        if error is not None:
            self._all_look(pool)  # they can no longer count on it: back to their own looks

    def _all_look(self, pool: PoolListing) -> None:
        resting, pool.resting, pool.rested, pool.covered = pool.resting, {}, 0, 0
        for subscriptions in resting.values():
            for subscription in subscriptions:
                subscription.look_soon()

    # -- resting ------------------------------------------------------------------------------------
    def rest(self, subscription: Resting, pool_id: str, looked_at: float) -> float | None:
        """The job's look (started at ``looked_at``) found nothing moving: it rests on the pool's listing. How long
        it may go without looking at itself: ``REST_LOOK_SECONDS`` once the pulse covers it (``PULSE_MIN_JOBS`` rest
        on the pool, and the pool was listed no later than its look, so that the next listing shows any change
        since); None while it does not (it backs off on its own)."""
        pool = self.pool(pool_id)
        if pool.failures:
            self.stop_resting(subscription, pool_id)
            return None
        subs = pool.resting.setdefault(subscription.job_id, {})
        was = subs.get(subscription)
        pool.rested += was is None
        covered = pool.rested >= PULSE_MIN_JOBS and pool.listed_at is not None and pool.listed_at <= looked_at
        pool.covered += covered - bool(was)
        subs[subscription] = covered
        return REST_LOOK_SECONDS if covered else None

    def stop_resting(self, subscription: Resting, pool_id: str) -> None:
        """The job no longer rests on the pool (it moves, waits for its streamed tasks, or left)."""
        pool = self._pools.get(pool_id)
        if pool is None:
            return
        subs = pool.resting.get(subscription.job_id)
        if subs is not None and subscription in subs:
            pool.covered -= subs.pop(subscription)
            pool.rested -= 1
            if not subs:
                del pool.resting[subscription.job_id]

    def due(self, now: float, interval: float) -> list[str]:
        """The pools the pulse lists now: ``PULSE_MIN_JOBS`` jobs rest on each, its last listing is older than
        ``LISTING_SECONDS`` (or ``interval``, if longer) and none is in flight or backing off."""
        period = max(LISTING_SECONDS, interval)
        return [
            pool.pool_id
            for pool in self._pools.values()
            if pool.rested >= PULSE_MIN_JOBS
            and pool.in_flight is None
            and not pool.failures
            and (pool.listed_at is None or now - pool.listed_at >= period)
        ]

    def pulse(self, lister: Lister, interval: float) -> None:
        """Start listing the pools due (see :meth:`due`), each in a task of its own; a failure is the listing's
        (each job learns of it when it asks)."""
        for pool_id in self.due(time.time(), interval):
            self._start(self.pool(pool_id), lister)

    def all_look(self) -> None:
        """The view cannot list the account's jobs: every resting job looks at itself again."""
        for pool in self._pools.values():
            self._all_look(pool)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _consume(task: asyncio.Future[Any]) -> None:
    """A listing's failure is its waiters' to handle; without waiters it is not an unretrieved exception."""
    if not task.cancelled():
        task.exception()


class SharedNodes:
    """A trigger's hook whose pool node listings are its account view's shared ones (see :class:`PoolListings`),
    made with the view's own hook while it looks (``view_hook``), else with the trigger's."""

    def __init__(self, hook: Any, listings: PoolListings, view_hook: Callable[[], Lister | None]) -> None:
        self._hook = hook
        self._listings = listings
        self._view_hook = view_hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hook, name)

    async def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None:
        return await self._listings.nodes(pool_id, self._view_hook() or self._hook)

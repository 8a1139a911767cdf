"""The account view: one look at a Batch account's jobs for all the deferred triggers of a triggerer.

Watched one by one, a thousand deferred jobs cost a thousand requests a poll, whatever happens to them. The
view makes one request a poll per account instead: List Jobs filtered on the service to the jobs whose state
changed since the last look (``stateTransitionTime ge ...``, a filter Batch documents for List Jobs), three
fields each. A trigger waits on the view and looks at its own job (task counts) only for what a job listing
cannot show (:mod:`.subscription`: when its job changed, its first look, a cadence that backs off, and when its
pool's listing saw its tasks move: :mod:`.pool_nodes`). Its tasks' output is read on another cadence, the
trigger's own, from the account's output reads (:mod:`.output_reads`). The words are defined once in
docs/explanation/account-view.md#glossary.

"Since" is the service's clock, never the triggerer's: the ``Date`` of the previous look's answer, less
``OVERLAP_SECONDS`` so that a transition stamped just before an answer (by another machine of the service) is
still listed by the next look; what two looks both list is reported once (by its ``stateTransitionTime``).
The view's first request reads the clock only, and a trigger subscribes before its first look at its job, so
no transition after a trigger started falls between two looks. A trigger that joins after its task deferred
(a restarted triggerer, or one that took it over) asks the next look to reach back to the deferral
(``CATCH_UP_MARGIN_SECONDS`` earlier, for the clocks of the worker and the service): a job that ended while
no triggerer watched it is listed, and its trigger need not look at it first to find out.

Two kinds of subscribers: a :class:`~.subscription.Subscription` is a deferred trigger's, told when its own job
changed; a :class:`~.listeners.ChangeListener` is told of every change each look lists (:mod:`.listeners`).
Both keep the one look per account alive; neither adds a request.

One view per event loop (a triggerer process) and connection (an account and its credential): a failing
account or credential slows only its own view. The view backs off on throttling and server errors
(``Retry-After`` where sent); while it fails, its triggers fall back to their own cadence. The last subscriber
to leave stops the look.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import datetime, timedelta, timezone

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.hooks.errors import describe_error, is_transient, retry_after_seconds
from airflow_provider_azbatch.model.records import JobChange
from airflow_provider_azbatch.retries import Backoff
from airflow_provider_azbatch.triggers.listeners import ChangeListener, Listeners, Listening
from airflow_provider_azbatch.triggers.output_reads import OutputReads
from airflow_provider_azbatch.triggers.pool_nodes import PoolListings, SharedNodes
from airflow_provider_azbatch.triggers.subscription import MAX_LOOK_SECONDS, OwnLooks, Subscription, look_after

__all__ = [
    "AccountView",
    "ChangeListener",
    "Listening",
    "OwnLooks",
    "SharedNodes",
    "Subscription",
    "account_view",
    "look_after",
    "open_view_count",
    "shared_nodes",
    "subscribe",
    "watch_job",
]

log = logging.getLogger(__name__)

# Each look lists what changed this long before the service's time at the previous look.
OVERLAP_SECONDS = 5.0
# How long a new subscriber waits for the view's first read of the service's clock before it goes on anyway.
READY_WAIT_SECONDS = 10.0
# A look that reaches back to a deferral (or a listener's since) starts this much earlier: the worker's clock
# and the service's may differ.
CATCH_UP_MARGIN_SECONDS = 60.0


class AccountView:
    """The periodic look at one account's jobs (see the module docstring)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self._subscribers: dict[str, list[Subscription]] = {}
        self.listeners = Listeners(conn_id)
        self._count = 0
        self._seen: dict[str, str] = {}  # job id -> stateTransitionTime last reported to its triggers
        self._catch_up: datetime | None = None  # how far back the next look must reach for those who joined late
        self._output: OutputReads | None = None
        self.pools = PoolListings()
        self.hook: AzureBatchAsyncHook | None = None  # the view's own, while it looks (pool listings use it)
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()  # the first look answered (or failed): subscribers need not wait longer
        self._wake = asyncio.Event()
        self.looks = 0  # for tests and the benchmark
        self.healthy = False  # the last look answered
        self.failures = 0

    @property
    def size(self) -> int:
        return self._count

    def job_look_interval(self, poll_interval: float) -> float:
        rate = config.get_float("job_looks_per_second")
        spread = self._count / rate if rate > 0 else MAX_LOOK_SECONDS
        return max(poll_interval, min(MAX_LOOK_SECONDS, spread))

    def output_reads(self) -> OutputReads:
        """The account's output reads (made with the first subscription)."""
        if self._output is None:
            self._output = OutputReads(self.conn_id)
        return self._output

    def subscribe(self, job_id: str, poll_interval: float, since: datetime | None = None) -> Subscription:
        """A deferred trigger joins; ``since``: the next look lists the changes since then too (its deferral)."""
        subscription = Subscription(self, job_id, poll_interval)
        self._subscribers.setdefault(job_id, []).append(subscription)
        self._join(poll_interval, since)
        return subscription

    def listen(self, listener: ChangeListener, since: datetime | None = None) -> Listening:
        """A listener joins: from the next look on, it is told of every change listed (with ``since``: every
        change since then, the next look reaching back to it, ``CATCH_UP_MARGIN_SECONDS`` earlier)."""
        listening = Listening(self, listener, since)
        self.listeners.all.append(listening)
        self._join(listener.interval, since)
        return listening

    def _join(self, interval: float, since: datetime | None) -> None:
        shorter = self._count > 0 and interval < self.interval()
        self._count += 1
        if since is not None:
            reach = since - timedelta(seconds=CATCH_UP_MARGIN_SECONDS)
            self._catch_up = reach if self._catch_up is None else min(self._catch_up, reach)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"azbatch-account-view-{self.conn_id}")
        elif shorter:
            self._wake.set()  # a shorter interval than the view sleeps: look now, then at the shorter one

    async def unsubscribe(self, subscription: Subscription) -> None:
        subs = self._subscribers.get(subscription.job_id)
        if subs is None or subscription not in subs:
            return
        subs.remove(subscription)
        if not subs:
            del self._subscribers[subscription.job_id]
            self._seen.pop(subscription.job_id, None)
        await self._leave()

    async def unlisten(self, listening: Listening) -> None:
        if listening in self.listeners.all:
            self.listeners.all.remove(listening)
            await self._leave()

    async def _leave(self) -> None:
        self._count -= 1
        if self._count == 0:
            _views.pop((id(asyncio.get_running_loop()), self.conn_id), None)
            await self.pools.close()
            task, self._task = self._task, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            output, self._output = self._output, None
            if output is not None:
                await output.close()

    def interval(self) -> float:
        intervals = [s.poll_interval for subs in self._subscribers.values() for s in subs]
        intervals += [listening.listener.interval for listening in self.listeners.all]
        return min(intervals, default=5.0)

    def observe(self, changes: list[JobChange], reach: datetime | None = None) -> None:
        """Tell the subscribers of each job whose state changed since it was last reported, and the listeners
        of every change listed (each transition once); ``reach``: how far back the look listed."""
        for change in changes:
            subs = self._subscribers.get(change.id)
            if not subs:
                continue
            seen = self._seen.get(change.id)
            if seen == change.at:
                continue
            self._seen[change.id] = change.at
            if seen is None and change.state == "active":
                # First listed since its trigger subscribed, and still running: a job created (or re-enabled)
                # recently, which its trigger looked at when it started. Nothing it must look at again now.
                continue
            for subscription in subs:
                subscription.notify(change)
        if self.listeners.all:
            self.listeners.tell(changes, reach)

    def _notify_all(self) -> None:
        for subs in self._subscribers.values():
            for subscription in subs:
                subscription.notify()

    async def _run(self) -> None:
        try:
            await self._look_periodically()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # no client for the connection: each trigger finds out at its own look
            log.warning("Batch account view of connection %r stopped: %s", self.conn_id, describe_error(exc))
            self.healthy = False
            self.ready.set()
            self._notify_all()

    async def _look_periodically(self) -> None:
        hook = AzureBatchAsyncHook(self.conn_id)
        backoff = Backoff(initial=1.0, maximum=MAX_LOOK_SECONDS)
        since: datetime | None = None
        failing = False
        async with hook.connected():
            self.hook = hook
            try:
                while True:
                    catch_up = self._catch_up
                    reach = since if catch_up is None else (catch_up if since is None else min(since, catch_up))
                    self.listeners.start_from(since)
                    try:
                        changes, answered = await hook.list_job_changes(reach, self.listeners.select())
                    except Exception as exc:
                        delay = self._failed(exc, backoff, failing)
                        failing = True
                    else:
                        if reach is not None:
                            self.observe(changes, reach)
                        if self._catch_up is catch_up:
                            self._catch_up = None  # reached (a subscriber who joined meanwhile asks again)
                        since = answered - timedelta(seconds=OVERLAP_SECONDS)
                        self.listeners.forget_before(since)
                        self.looks += 1
                        self.healthy = True
                        failing = False
                        backoff.reset()
                        self.ready.set()
                        delay = self.interval()
                        self.pools.pulse(hook, delay)
                    self._wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), delay)
            finally:
                self.hook = None

    def _failed(self, exc: Exception, backoff: Backoff, failing: bool) -> float:
        """A look failed: how long until the next (backing off); the triggers fall back to their own looks."""
        self.failures += 1
        self.healthy = False
        self.ready.set()
        if not failing:
            self.pools.all_look()  # the jobs that rest on their pools can no longer count on the view
        if not is_transient(exc):
            # Refused (a credential, a permission): each trigger finds out at its own next look and ends as it
            # would have; nothing is tried faster than the backoff.
            self._notify_all()
        delay = backoff.next_delay(retry_after_seconds(exc))
        if not failing:
            log.warning(
                "Batch account view of connection %r: %s; its triggers look at their own jobs until it recovers "
                "(next try in %.1f s)",
                self.conn_id,
                describe_error(exc),
                delay,
            )
        return delay


_views: dict[tuple[int, str], AccountView] = {}


def account_view(conn_id: str) -> AccountView:
    """The view of this connection's account in the running event loop (made on first use)."""
    key = (id(asyncio.get_running_loop()), conn_id)
    view = _views.get(key)
    if view is None:
        view = _views[key] = AccountView(conn_id)
    return view


async def subscribe(conn_id: str, job_id: str, poll_interval: float, deferred_at: float | None = None) -> Subscription:
    """Join the account's view; returns once the view knows the service's time (or gave up waiting for it),
    so that every transition of the job after this returns is listed by a later look. ``deferred_at`` (epoch
    seconds): when the task deferred; a trigger that starts later asks the next look to reach back to it."""
    view = account_view(conn_id)
    since = None
    if deferred_at is not None and time.time() - deferred_at > OVERLAP_SECONDS:
        since = datetime.fromtimestamp(deferred_at, timezone.utc)
    subscription = view.subscribe(job_id, poll_interval, since)
    if not view.ready.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(view.ready.wait(), READY_WAIT_SECONDS)
    return subscription


async def watch_job(
    conn_id: str, job_id: str, poll_interval: float, deferred_at: float | None = None
) -> Subscription | OwnLooks:
    """What a trigger waits on between its looks at its job: the account's view, unless switched off."""
    if not config.get_bool("account_view"):
        return OwnLooks(poll_interval)
    return await subscribe(conn_id, job_id, poll_interval, deferred_at)


def shared_nodes(hook: AzureBatchAsyncHook, subscription: Subscription | OwnLooks) -> AzureBatchAsyncHook | SharedNodes:
    """What a trigger's watch reads through: its hook, with pool node listings shared by the view's jobs."""
    if not isinstance(subscription, Subscription):
        return hook
    view = subscription.view
    return SharedNodes(hook, view.pools, lambda: view.hook)


def open_view_count() -> int:
    """How many account views are open (for tests and diagnostics)."""
    return len(_views)

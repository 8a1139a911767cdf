"""The account view: one look at a Batch account's jobs for all the deferred triggers of a triggerer.

Watched one by one, a thousand deferred jobs cost a thousand requests a poll, whatever happens to them. The
view makes one request a poll per account instead: List Jobs filtered on the service to the jobs whose state
changed since the last look (``stateTransitionTime ge ...``, a filter Batch documents for List Jobs), three
fields each. A trigger waits on the view and looks at its own job when the view saw it change (it ended, was
terminated or is being deleted), and otherwise at a bounded cadence for what a job listing cannot show
(progress, tasks blocked by failed dependencies, a pool that cannot give nodes): every poll for a few jobs,
every ``jobs / [azbatch] job_looks_per_second`` seconds for many (at most ``MAX_JOB_LOOK_SECONDS``).

"Since" is the service's clock, never the triggerer's: the ``Date`` of the previous look's answer, less
``OVERLAP_SECONDS`` so that a transition stamped just before an answer (by another machine of the service) is
still listed by the next look; what two looks both list is reported once (by its ``stateTransitionTime``).
The view's first request reads the clock only, and a trigger subscribes before its first look at its job, so
no transition after a trigger started falls between two looks.

One view per event loop (a triggerer process) and connection (an account and its credential): a failing
account or credential slows only its own view. The view backs off on throttling and server errors
(``Retry-After`` where sent); while it fails, its triggers fall back to their own cadence. The last trigger
to leave stops the look.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.hooks.errors import describe_error, is_transient, retry_after_seconds
from airflow_provider_azbatch.retries import Backoff
from airflow_provider_azbatch.watching.state import JobChange

log = logging.getLogger(__name__)

# Each look lists what changed this long before the service's time at the previous look.
OVERLAP_SECONDS = 5.0
# A trigger looks at its own job at least this often, however many jobs the account view watches.
MAX_JOB_LOOK_SECONDS = 60.0
# How long a new subscriber waits for the view's first read of the service's clock before it goes on anyway.
READY_WAIT_SECONDS = 10.0


class Subscription:
    """One trigger's place in a view: told when its job changed."""

    def __init__(self, view: AccountView, job_id: str, poll_interval: float) -> None:
        self.view = view
        self.job_id = job_id
        self.poll_interval = poll_interval
        self.changed = False
        self._waiter: asyncio.Future[None] | None = None

    def notify(self) -> None:
        self.changed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> bool:
        """Wait until the job changed or ``timeout`` seconds passed; whether it changed."""
        if not self.changed and timeout > 0:
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
        """How long this trigger may go without looking at its job when the view saw no change."""
        return self.view.job_look_interval(self.poll_interval)

    @property
    def watching(self) -> bool:
        """Whether the view's last look answered: it reports the job's state changes."""
        return self.view.healthy

    async def close(self) -> None:
        await self.view.unsubscribe(self)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class AccountView:
    """The periodic look at one account's jobs (see the module docstring)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self._subscribers: dict[str, list[Subscription]] = {}
        self._count = 0
        self._seen: dict[str, str] = {}  # job id -> stateTransitionTime last reported
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
        spread = self._count / rate if rate > 0 else MAX_JOB_LOOK_SECONDS
        return max(poll_interval, min(MAX_JOB_LOOK_SECONDS, spread))

    def subscribe(self, job_id: str, poll_interval: float) -> Subscription:
        shorter = self._count > 0 and poll_interval < self.interval()
        subscription = Subscription(self, job_id, poll_interval)
        self._subscribers.setdefault(job_id, []).append(subscription)
        self._count += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"azbatch-account-view-{self.conn_id}")
        elif shorter:
            self._wake.set()  # a shorter interval than the view sleeps: look now, then at the shorter one
        return subscription

    async def unsubscribe(self, subscription: Subscription) -> None:
        subs = self._subscribers.get(subscription.job_id)
        if subs is None or subscription not in subs:
            return
        subs.remove(subscription)
        self._count -= 1
        if not subs:
            del self._subscribers[subscription.job_id]
            self._seen.pop(subscription.job_id, None)
        if self._count == 0:
            _views.pop((id(asyncio.get_running_loop()), self.conn_id), None)
            task, self._task = self._task, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def interval(self) -> float:
        return min((s.poll_interval for subs in self._subscribers.values() for s in subs), default=5.0)

    def observe(self, changes: list[JobChange]) -> None:
        """Tell the subscribers of each job whose state changed since it was last reported."""
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
                subscription.notify()

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
        backoff = Backoff(initial=1.0, maximum=MAX_JOB_LOOK_SECONDS)
        since: datetime | None = None
        failing = False
        async with hook.connected():
            while True:
                try:
                    changes, answered = await hook.list_job_changes(since)
                except Exception as exc:
                    self.failures += 1
                    self.healthy = False
                    self.ready.set()
                    if not is_transient(exc):
                        # Refused (a credential, a permission): each trigger finds out at its own next look and
                        # ends as it would have; nothing is tried faster than the backoff.
                        self._notify_all()
                    delay = backoff.next_delay(retry_after_seconds(exc))
                    if not failing:
                        log.warning(
                            "Batch account view of connection %r: %s; its triggers look at their own jobs until it "
                            "recovers (next try in %.1f s)",
                            self.conn_id,
                            describe_error(exc),
                            delay,
                        )
                    failing = True
                else:
                    if since is not None:
                        self.observe(changes)
                    since = answered - timedelta(seconds=OVERLAP_SECONDS)
                    self.looks += 1
                    self.healthy = True
                    failing = False
                    backoff.reset()
                    self.ready.set()
                    delay = self.interval()
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)


_views: dict[tuple[int, str], AccountView] = {}


def account_view(conn_id: str) -> AccountView:
    """The view of this connection's account in the running event loop (made on first use)."""
    key = (id(asyncio.get_running_loop()), conn_id)
    view = _views.get(key)
    if view is None:
        view = _views[key] = AccountView(conn_id)
    return view


async def subscribe(conn_id: str, job_id: str, poll_interval: float) -> Subscription:
    """Join the account's view; returns once the view knows the service's time (or gave up waiting for it),
    so that every transition of the job after this returns is listed by a later look."""
    view = account_view(conn_id)
    subscription = view.subscribe(job_id, poll_interval)
    if not view.ready.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(view.ready.wait(), READY_WAIT_SECONDS)
    return subscription


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

    @property
    def watching(self) -> bool:
        return False

    async def close(self) -> None:
        return None


async def watch_job(conn_id: str, job_id: str, poll_interval: float) -> Subscription | OwnLooks:
    """What a trigger waits on between its looks at its job: the account's view, unless switched off."""
    if not config.get_bool("account_view"):
        return OwnLooks(poll_interval)
    return await subscribe(conn_id, job_id, poll_interval)


def open_view_count() -> int:
    """How many account views are open (for tests and diagnostics)."""
    return len(_views)

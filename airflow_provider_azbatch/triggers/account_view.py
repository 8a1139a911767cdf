"""The account view: one look at a Batch account's jobs for all the deferred triggers of a triggerer.

Watched one by one, a thousand deferred jobs cost a thousand requests a poll, whatever happens to them. The
view makes one request a poll per account instead: List Jobs filtered on the service to the jobs whose state
changed since the last look (``stateTransitionTime ge ...``, a filter Batch documents for List Jobs), three
fields each. A trigger waits on the view and looks at its own job (task counts) only for what a job listing
cannot show:

- when the view saw its job change (it ended, was terminated or is being deleted); a job the view lists as
  completed needs no look at all when no output of it is left to read;
- its first look, paced for the whole triggerer (``FIRST_LOOKS_PER_SECOND``): a triggerer that starts with
  thousands of deferred jobs looks at them over seconds, not all at once;
- progress, tasks blocked by failed dependencies, a pool that cannot give nodes: every poll for a few jobs,
  every ``jobs / [azbatch] job_looks_per_second`` seconds for many, and twice as far apart after each look at
  which nothing moved (a job whose tasks wait for nodes excepted), at most ``MAX_JOB_LOOK_SECONDS``. One idle
  deferred job thus costs the view's listing a poll and a look a minute: what 0.3's own poll cost;
- when its job is quiet on a pool with other quiet jobs: when the pool's pulse saw its tasks move
  (:mod:`airflow_provider_azbatch.triggers.pool_pulse`: one listing of the pool's nodes every few seconds
  instead of a look at every job).

Its tasks' output is read on another cadence, the trigger's own, from the account's output reads
(:mod:`airflow_provider_azbatch.triggers.output_reads`: likeliest growth first, paced, within ``[azbatch]
output_requests_per_second``).

"Since" is the service's clock, never the triggerer's: the ``Date`` of the previous look's answer, less
``OVERLAP_SECONDS`` so that a transition stamped just before an answer (by another machine of the service) is
still listed by the next look; what two looks both list is reported once (by its ``stateTransitionTime``).
The view's first request reads the clock only, and a trigger subscribes before its first look at its job, so
no transition after a trigger started falls between two looks. A trigger that joins after its task deferred
(a restarted triggerer, or one that took it over) asks the next look to reach back to the deferral
(``CATCH_UP_MARGIN_SECONDS`` earlier, for the clocks of the worker and the service): a job that ended while
no triggerer watched it is listed, and its trigger need not look at it first to find out.

**Two kinds of subscribers.** A :class:`Subscription` is a deferred trigger's: told when its own job changed.
A :class:`ChangeListener` (an event trigger that fires when any job of the account completes, say) is told of
every change each look lists, whatever job it is, each transition once; it may ask for more fields of each job
(``select``: ``metadata``, ``executionInfo``, ...: they come with the listing, one ``$select`` for all) and to
reach back in time when it joins (``since``: the look that reaches back tells it every change since then, also
those the view told other listeners before; a restarted job watcher catches up so). Both keep the one look per
account alive; neither adds a request. ``AccountView.listen`` joins one.

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
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta, timezone
from typing import Protocol

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.hooks.errors import describe_error, is_transient, retry_after_seconds
from airflow_provider_azbatch.model.records import JobChange
from airflow_provider_azbatch.model.records import service_time as _wire_time
from airflow_provider_azbatch.retries import Backoff
from airflow_provider_azbatch.triggers.output_reads import OutputReads, Reader
from airflow_provider_azbatch.triggers.pool_pulse import PoolPulse

log = logging.getLogger(__name__)

# Each look lists what changed this long before the service's time at the previous look.
OVERLAP_SECONDS = 5.0
# A trigger looks at its own job at least this often, however many jobs the account view watches.
MAX_JOB_LOOK_SECONDS = 60.0
# How long a new subscriber waits for the view's first read of the service's clock before it goes on anyway.
READY_WAIT_SECONDS = 10.0
# First looks of triggers at their jobs a triggerer makes a second at most, all its accounts together.
FIRST_LOOKS_PER_SECOND = 100.0
# A look that reaches back to a deferral (or a listener's since) starts this much earlier: the worker's clock
# and the service's may differ.
CATCH_UP_MARGIN_SECONDS = 60.0


class Subscription:
    """One deferred trigger's place in a view: told when its job changed, woken when output reads were granted."""

    def __init__(self, view: AccountView, job_id: str, poll_interval: float) -> None:
        self.view = view
        self.job_id = job_id
        self.poll_interval = poll_interval
        self.changed = False
        self.last_change: JobChange | None = None  # the last change of the job the view listed
        self._waiter: asyncio.Future[None] | None = None
        self.reads: Reader = view.output_reads().reader(self.nudge)
        # The pool whose pulse this trigger's quiet job waits on (see triggers/pool_pulse.py), and when the pulse
        # asked it to look at its job (epoch seconds, paced; None: it did not).
        self.quiet_pool: str | None = None
        self.look_request: float | None = None

    def notify(self, change: JobChange | None = None) -> None:
        """The job changed (``change``, as listed; None: look at it anyway, e.g. the view failed for good)."""
        self.changed = True
        self.last_change = change
        self.nudge()

    def look_soon(self) -> None:
        """The pool pulse saw the job's tasks move (or can no longer tell): look at the job, paced with the
        triggerer's first looks."""
        if self.look_request is None:
            self.look_request = first_look_slot(time.time())
        self.nudge()

    def take_look_request(self) -> float | None:
        """When the pool pulse asked for a look at the job (None: it did not since the last call)."""
        requested, self.look_request = self.look_request, None
        return requested

    def rest_on_pulse(self, pool_id: str) -> float | None:
        """The job is quiet on ``pool_id``: how long it may go without looking at itself, as the pool pulse tells
        it when its tasks move (None: no pulse covers the pool yet; it looks on its own cadence)."""
        pulse = self.view.pulse
        return pulse.quiet_look_interval() if pulse.quiet(self, pool_id) else None

    def stir(self) -> None:
        """The job is not quiet (any more): it looks on its own cadence."""
        self.view.pulse.unquiet(self)

    def nudge(self) -> None:
        """Wake the trigger (output reads were granted) without a change of its job."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> bool:
        """Wait until the job changed, reads were granted, the pool pulse asked for a look, or ``timeout`` seconds
        passed; whether it changed."""
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
        """How long this trigger may go without looking at its job when the view saw no change (the shortest,
        before the trigger backs off for a job at which nothing moves)."""
        return self.view.job_look_interval(self.poll_interval)

    def first_look_at(self, now: float) -> float:
        """When this trigger may first look at its job (epoch seconds; see ``FIRST_LOOKS_PER_SECOND``)."""
        return first_look_slot(now)

    @property
    def watching(self) -> bool:
        """Whether the view's last look answered: it reports the job's state changes."""
        return self.view.healthy

    async def close(self) -> None:
        self.reads.close()
        await self.view.unsubscribe(self)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_first_looks: dict[int, float] = {}  # event loop -> when its next first look may be (epoch seconds)


def first_look_slot(now: float) -> float:
    """A time for a first look, ``1 / FIRST_LOOKS_PER_SECOND`` after the one before in this event loop."""
    loop_id = id(asyncio.get_running_loop())
    slot = max(now, _first_looks.get(loop_id, 0.0))
    _first_looks[loop_id] = slot + 1.0 / FIRST_LOOKS_PER_SECOND
    return slot


class ChangeListener(Protocol):
    """A subscriber told of every change the view's looks list in its account (see the module docstring).

    ``select``: fields of a job it needs besides ``id``, ``state`` and ``stateTransitionTime`` (List Jobs
    ``$select`` names: top-level properties such as ``metadata``, ``executionInfo``, ``poolInfo``); each
    :class:`~airflow_provider_azbatch.model.records.JobChange` carries the entry as listed in ``fields``.
    ``interval``: how often it wants the account looked at (seconds; the view looks at the shortest interval
    any subscriber asked for). ``changes`` is called from the view's look, in the event loop: it must not
    block (hand work to a task of its own).
    """

    select: Collection[str]
    interval: float

    def changes(self, changes: Sequence[JobChange]) -> None: ...


class Listening:
    """A listener's place in a view; ``close`` leaves it."""

    def __init__(self, view: AccountView, listener: ChangeListener, since: datetime | None) -> None:
        self.view = view
        self.listener = listener
        self.since = since
        # Joined with a ``since``: the first look that reaches back to it tells it every change listed since then,
        # also those the view told other listeners before it joined (a watcher restarted beside them).
        self.catching_up = since is not None

    async def close(self) -> None:
        await self.view.unlisten(self)


class AccountView:
    """The periodic look at one account's jobs (see the module docstring)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self._subscribers: dict[str, list[Subscription]] = {}
        self._listeners: list[Listening] = []
        self._count = 0
        self._seen: dict[str, str] = {}  # job id -> stateTransitionTime last reported to its triggers
        self._listed: dict[str, tuple[str, datetime]] = {}  # job id -> its last transition told to listeners
        self._catch_up: datetime | None = None  # how far back the next look must reach for those who joined late
        self._output: OutputReads | None = None
        self.pulse = PoolPulse()
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
        self._listeners.append(listening)
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
        self.pulse.unquiet(subscription)
        if not subs:
            del self._subscribers[subscription.job_id]
            self._seen.pop(subscription.job_id, None)
        await self._leave()

    async def unlisten(self, listening: Listening) -> None:
        if listening in self._listeners:
            self._listeners.remove(listening)
            await self._leave()

    async def _leave(self) -> None:
        self._count -= 1
        if self._count == 0:
            _views.pop((id(asyncio.get_running_loop()), self.conn_id), None)
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
        intervals += [listening.listener.interval for listening in self._listeners]
        return min(intervals, default=5.0)

    def select(self) -> list[str]:
        """The fields the look asks for besides id, state and stateTransitionTime: what listeners need."""
        return sorted({name for listening in self._listeners for name in listening.listener.select})

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
        if self._listeners:
            self._tell_listeners(changes, reach)

    def _tell_listeners(self, changes: list[JobChange], reach: datetime | None = None) -> None:
        new: list[tuple[JobChange, datetime]] = []
        listed: list[tuple[JobChange, datetime]] = []
        for change in changes:
            at = _wire_time(change.at)
            listed.append((change, at))
            last = self._listed.get(change.id)
            if last is not None and (last[0] == change.at or last[1] > at):
                continue  # listed again by an overlapping look, or older than what was told
            self._listed[change.id] = (change.at, at)
            new.append((change, at))
        for listening in list(self._listeners):
            since = listening.since
            if listening.catching_up and since is not None and reach is not None and reach <= since:
                listening.catching_up = False
                told = [change for change, at in listed if at >= since]
            else:
                told = [change for change, at in new if since is None or at >= since]
            if told:
                try:
                    listening.listener.changes(told)
                except Exception:  # one listener's bug must not stop the look for the others
                    log.exception("A listener of the Batch account view of connection %r failed", self.conn_id)

    def _forget_listed_before(self, since: datetime) -> None:
        """What was listed before ``since`` cannot be listed again by the next looks: no need to remember it."""
        for job_id in [job_id for job_id, (_, at) in self._listed.items() if at < since]:
            del self._listed[job_id]

    async def _pulse(self, hook: AzureBatchAsyncHook, every: float) -> None:
        """List the nodes of the pools whose pulse is due (see :mod:`airflow_provider_azbatch.triggers.pool_pulse`)."""
        pools = self.pulse.due(time.time())
        if not pools:
            return
        answers = await asyncio.gather(*(hook.list_pool_nodes(pool_id) for pool_id in pools), return_exceptions=True)
        now = time.time()
        for pool_id, answer in zip(pools, answers, strict=True):
            if isinstance(answer, BaseException):
                if isinstance(answer, asyncio.CancelledError):
                    raise answer
                log.debug("Pool pulse of %s (connection %r) failed: %s", pool_id, self.conn_id, describe_error(answer))
                self.pulse.failed(pool_id, now, every)
            else:
                self.pulse.observe(pool_id, answer, now, every)

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
                catch_up = self._catch_up
                reach = since if catch_up is None else (catch_up if since is None else min(since, catch_up))
                for listening in self._listeners:
                    if listening.since is None:  # it hears of what changed since it joined (the last look)
                        listening.since = since or datetime.now(timezone.utc)
                try:
                    changes, answered = await hook.list_job_changes(reach, self.select())
                except Exception as exc:
                    self.failures += 1
                    self.healthy = False
                    self.ready.set()
                    if not failing:
                        self.pulse.release_all()  # the jobs it covers can no longer count on the view
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
                    if reach is not None:
                        self.observe(changes, reach)
                    if self._catch_up is catch_up:
                        self._catch_up = None  # reached (a subscriber who joined meanwhile asks again)
                    since = answered - timedelta(seconds=OVERLAP_SECONDS)
                    self._forget_listed_before(since)
                    self.looks += 1
                    self.healthy = True
                    failing = False
                    backoff.reset()
                    self.ready.set()
                    delay = self.interval()
                    await self._pulse(hook, delay)
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


async def watch_job(
    conn_id: str, job_id: str, poll_interval: float, deferred_at: float | None = None
) -> Subscription | OwnLooks:
    """What a trigger waits on between its looks at its job: the account's view, unless switched off."""
    if not config.get_bool("account_view"):
        return OwnLooks(poll_interval)
    return await subscribe(conn_id, job_id, poll_interval, deferred_at)


def open_view_count() -> int:
    """How many account views are open (for tests and diagnostics)."""
    return len(_views)

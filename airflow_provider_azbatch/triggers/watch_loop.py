"""The job trigger's watch: poll until the job is over, an error ends the watch, or the job moves to dedicated nodes.

It drives the same watch core as the synchronous operator (:mod:`airflow_provider_azbatch.watching`) with the
native ``azure.batch.aio`` client, shared per connection in the triggerer process. Between its own looks at its
job it waits on the account view (:mod:`.account_view`, ``[azbatch] account_view``, on by default: one listing of
the account's changed jobs per poll for all the triggers of the process), which tells it when its job changed; it
looks at the job itself then, and otherwise at a cadence bounded by ``[azbatch] job_looks_per_second`` (switched
off, every poll: :func:`~.subscription.look_after`). Output costs requests in proportion to the streams that grew (see
:mod:`airflow_provider_azbatch.watching.core`), made concurrently, every poll.

A poll more than a stall late (or after one that took that long) first catches up with a checkpoint another
trigger wrote meanwhile (:mod:`.handover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    from asyncio import timeout_at
else:  # aiohttp's own dependency before Python 3.11
    from async_timeout import timeout_at  # type: ignore[import-not-found, unused-ignore]

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.triggers import account_view, handover, kill, watch_events
from airflow_provider_azbatch.watching.budget import TokenBucket
from airflow_provider_azbatch.watching.drivers import run_async
from airflow_provider_azbatch.watching.outages import OutagePolicy, WaitFailed
from airflow_provider_azbatch.watching.pool_health import PoolProblem
from airflow_provider_azbatch.watching.preemption import SpotFallbackDue
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow.triggers.base import TriggerEvent

    from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
    from airflow_provider_azbatch.model.reads import AsyncBatchReads
    from airflow_provider_azbatch.triggers.checkpoints import Checkpoints
    from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
    from airflow_provider_azbatch.triggers.output_reads import Reader
    from airflow_provider_azbatch.watching.core import JobWatcher

# Requests one trigger makes at once (the shared client's connection pool bounds all triggers together).
STEP_CONCURRENCY = 8

_look_budgets: dict[int, TokenBucket] = {}


def until(deadline: float | None) -> contextlib.AbstractAsyncContextManager[Any]:
    """A scope cancelled at ``deadline`` (epoch seconds), leaving with ``asyncio.TimeoutError``."""
    if deadline is None:
        return contextlib.nullcontext()
    scope: contextlib.AbstractAsyncContextManager[Any] = timeout_at(
        asyncio.get_running_loop().time() + (deadline - time.time())
    )
    return scope


def shared_look_budget() -> TokenBucket:
    """The looks at quiet streams all the triggers of this event loop (a triggerer) share."""
    loop_id = id(asyncio.get_running_loop())
    budget = _look_budgets.get(loop_id)
    if budget is None:
        rate = config.get_float("stream_looks_per_second")
        budget = _look_budgets[loop_id] = TokenBucket(rate=rate, burst=rate)
    return budget


class WatchLoop:
    """One watch of the trigger's job; the deadline is the caller's. The trigger keeps what was shown
    (``_shown``) and the watch's state (``_state``), which the loop updates as it goes."""

    def __init__(
        self,
        trigger: AzureBatchJobTrigger,
        watcher: JobWatcher,
        hook: AzureBatchAsyncHook,
        checkpoints: Checkpoints,
        stall: float,
    ) -> None:
        self.trigger = trigger
        self.watcher = watcher
        self.hook = hook
        self.checkpoints = checkpoints
        self.stall = stall
        lines = trigger._lines
        assert lines is not None
        self.lines = lines
        self.policy = OutagePolicy(trigger.job_id, trigger.max_outage)
        self.limit = asyncio.Semaphore(STEP_CONCURRENCY)
        self.wake_at = time.time()
        self.next_look = 0.0  # when to look at the job itself (counts, ...) unless the view sees it change first
        self.look_every = 0.0
        self.changed = False  # the view saw the job change, or a new watcher: look at the job
        self.warm = False

    async def run(self) -> TriggerEvent:
        trigger = self.trigger
        trigger._state = self.watcher.state
        trigger._shown = self.watcher.state.to_json()
        subscription = await account_view.watch_job(
            trigger.azbatch_conn_id, trigger.job_id, trigger.poll_interval, trigger.deferred_at
        )
        self.subscription = subscription
        # The account's output reads (the view's); None: each trigger reads its own output every poll (no view).
        self.reads = subscription.reads if isinstance(subscription, account_view.Subscription) else None
        # Node samples from the view's pool listings, one per pool for all its jobs.
        self.asks: AsyncBatchReads = account_view.shared_nodes(self.hook, subscription)
        try:
            self.wake_at = time.time()
            self.next_look = subscription.first_look_at(self.wake_at)
            self.look_every = subscription.job_look_interval()
            while True:
                fired = await self._turn()
                if fired is not None:
                    return fired
        finally:
            await subscription.close()

    async def _turn(self) -> TriggerEvent | None:
        """One poll and the wait after it; the event when the watch ends."""
        started = time.time()
        late = started - self.wake_at
        if late > self.stall:
            await self._catch_up(self.watcher.state, late)
            started = time.time()  # what follows is a poll, to be timed as one
        self._take_look_request()
        job_id, lines = self.trigger.job_id, self.lines
        if self.changed and ended_as_listed(self.subscription, self.watcher):
            return watch_events.done(job_id, self.watcher.state, lines.take(), self.trigger._shown)
        reads = self.reads
        grants = reads.take() if reads is not None else set()
        self.watcher.output.requests = 0
        try:
            done = await self._poll(started, grants)
            overran = time.time() - started  # a stall can come during a poll
        except SpotFallbackDue as due:
            lines.show()
            return watch_events.fallback(job_id, self.watcher.state, str(due))
        except PoolProblem as problem:
            lines.show()
            return watch_events.error(job_id, self.watcher.state, str(problem), permanent=True, pool_problem=problem)
        except Exception as exc:
            lines.show()  # what the poll read before its error is in the state
            return await self._after_error(exc)
        finally:
            if reads is not None:
                reads.charge(self.watcher.output.requests, len(grants))
                reads.offer(self.watcher.read_schedules(time.time()))
        self.policy.succeeded()
        # It may have spanned a stall: see the module docstring.
        if overran > self.stall and await self._catch_up(WatchState.from_json(self._shown()), overran):
            self.wake_at = time.time()
            return None
        if done:
            return watch_events.done(job_id, self.watcher.state, lines.take(), self.trigger._shown)
        self._shown_poll()
        await self._wait()
        return None

    def _shown(self) -> dict[str, Any]:
        shown = self.trigger._shown
        assert shown is not None
        return shown

    def _take_look_request(self) -> None:
        self.watcher.job_state_watched = self.subscription.watching
        if isinstance(self.subscription, account_view.Subscription):
            requested = self.subscription.take_look_request()
            if requested is not None:  # its pool's listing saw its tasks move
                self.next_look = min(self.next_look, requested)

    async def _poll(self, started: float, grants: set[Any]) -> bool:
        """Look at the job and read its output, or only read its output (the view watches the job's state)."""
        watcher, subscription = self.watcher, self.subscription
        if self.reads is None:
            self.next_look = started + subscription.job_look_interval()
            return await run_async(watcher.step(time.time()), self.asks, self.limit)
        over = watcher.job_over()
        # A job over with streamed output still followed is looked at every poll: the look reads its tasks' final
        # states, then their output to the end (reads alone would go by states from before the end).
        if (over and watcher.following()) or ((self.changed or started >= self.next_look) and not over):
            done = await run_async(watcher.look(time.time(), grants), self.asks, self.limit)
            self.look_every = account_view.look_after(subscription, watcher, self.look_every, started)
            self.next_look = time.time() + self.look_every
            return done
        return await run_async(watcher.read(time.time(), grants), self.asks, self.limit)

    async def _after_error(self, exc: Exception) -> TriggerEvent | None:
        """A poll failed: the event if the watch gives up, else None once it waited to poll again."""
        try:
            delay = self.policy.delay_after(exc, time.monotonic())
        except WaitFailed as failed:
            return watch_events.error(self.trigger.job_id, self.watcher.state, str(failed), permanent=failed.permanent)
        self.trigger.log.warning(
            "Transient error from the Batch service (%s); retrying in %.1f s", describe_error(exc), delay
        )
        self.wake_at = time.time() + delay
        self.next_look = 0.0  # the job itself at the next poll
        self.changed = False
        await asyncio.sleep(delay)
        return None

    async def _catch_up(self, shown: WatchState, late: float) -> bool:
        """After a stall: go on from the checkpoint of a trigger that took the job over meanwhile, if one did
        (the lines of the poll in progress are then dropped: that one showed them); whether one did."""
        trigger = self.trigger
        taken_over = await handover.after_stall(trigger._read_checkpoint, trigger._stand_by, shown, late)
        if taken_over is None:
            return False
        self.lines.drop()
        # The other trigger's checkpoint counts as shown and written.
        self.watcher = trigger._watcher(taken_over)
        trigger._state = self.watcher.state
        trigger._shown = self.watcher.state.to_json()
        self.checkpoints.offer(trigger._shown, written=True)
        self.changed = True  # a new watcher: it looks at the job first
        return True

    def _shown_poll(self) -> None:
        """The poll's lines are shown, and its state is what the next checkpoint writes."""
        self.lines.show()
        if not self.warm:
            # After the first poll: on 3.2 the triggerer's requests wait for the first one's slow reply,
            # the connection this watch reads first among them.
            kill.warm_up(self.trigger)
            self.warm = True
        self.trigger._shown = self.watcher.state.to_json()
        self.checkpoints.offer(self.trigger._shown)
        if self.reads is not None:
            self._say_if_late(self.reads)

    async def _wait(self) -> None:
        """Until the next poll: the next look, sooner when output is due or the view sees the job change."""
        timeout = self.next_look - time.time()
        poll_interval = self.trigger.poll_interval
        if self.reads is None:
            if self.watcher.following():
                timeout = min(timeout, poll_interval)
        elif self.watcher.job_over() or self.watcher.unfinished_output():
            timeout = min(timeout, poll_interval)
        else:
            upcoming = self.reads.next_eligible()
            if upcoming is not None and upcoming <= self.next_look + poll_interval:
                # Reads are due about then: the look waits for them (a poll at most) and comes with them.
                timeout = max(timeout, 0.0) + poll_interval
        self.wake_at = time.time() + max(timeout, 0.0)
        self.changed = await self.subscription.wait(timeout)

    def _say_if_late(self, reads: Reader) -> None:
        """Tell the task's log when the account's output budget holds this job's output back (now and then)."""
        late = reads.lateness_report(time.time())
        if late is None:
            return
        self.trigger.log.info(
            "Batch job %s: new output was read up to %.0f s later than every poll_interval (%g s): the Batch "
            "account's output reads ([azbatch] output_requests_per_second = %g) are shared by %d followed files of "
            "this triggerer, the fastest-growing first",
            self.trigger.job_id,
            late,
            self.trigger.poll_interval,
            reads.budget,
            reads.followed(),
        )


def ended_as_listed(subscription: account_view.Subscription | account_view.OwnLooks, watcher: JobWatcher) -> bool:
    """The view listed the job as completed (nothing more can happen to it): over, without a look at it, when no
    output is left to read. The task reads the final counts itself when it resumes."""
    change = getattr(subscription, "last_change", None)
    if change is None or change.state != "completed":
        return False
    watcher.state.job_state = "completed"
    return watcher.job_over() and not watcher.following() and not watcher.unfinished_output()

"""``AzureBatchJobTrigger``: waits for a Batch job in the triggerer, streaming its tasks' output.

It drives the same watch core as the synchronous operator (:mod:`airflow_provider_azbatch.watching`)
with the native ``azure.batch.aio`` client, shared per connection in the triggerer process. Between its own
looks at its job it waits on the account view (:mod:`.account_view`, ``[azbatch] account_view``, on by default:
one listing of the account's changed jobs per poll for all the triggers of the process), which tells it when
its job changed; it looks at the job itself then, and otherwise at a cadence bounded by
``[azbatch] job_looks_per_second`` (switched off, every poll). Output costs requests in proportion to the
streams that grew (see :mod:`airflow_provider_azbatch.watching.core`), made concurrently, every poll.

The event it fires carries only what Airflow must see: the triggerer logs it in full, into the task's log. The
watch's final state and the lines of its last poll wait for the task in XCom (``RESULT_KEY``).

Deadlines hold whatever the load: the sleep ends at the deadline and a poll still in flight then is
cancelled, so the ``timeout`` event fires within moments of it.

Every line is printed once: the read position of each stream travels in the trigger's kwargs and events,
and is checkpointed (XCom ``azbatch_watch_state``) in the background, at most every
``[azbatch] checkpoint_interval`` seconds and only when it moved. A restarted or redistributed trigger
resumes from the last checkpoint; lines shown after it and before a crash are shown again (at most one
checkpoint interval's worth), none is lost.

Reading a checkpoint through a freshly started triggerer takes seconds (measured 5-8 s on Airflow 3.3.2,
against 60 ms in a warm one), so a trigger must not wait for one before its first poll when none can
exist: no checkpoint is written during the first ``FRESH_SECONDS`` after the task deferred, and a
trigger starting within them begins from its kwargs at once. The price: a triggerer restart within those
first seconds shows their output again.

With several triggerers, Airflow hands the triggers of one whose heartbeat lapsed for
``[triggerer] triggerer_health_check_threshold`` to another, even when it is still alive (stalled, paused,
cut off from the database), and cancels them there once it looks at the database again. Two things follow:

- Airflow 3.3 calls ``on_kill`` for such a cancellation as for a user's, and 3.0-3.2 cancel the trigger alike
  for a kill, a move, a shutdown: the trigger terminates the job only when its task instance is no longer
  deferred in its own try (a user marked or cleared it), never when the task is still deferred on a trigger
  that moved (:mod:`.kill` decides, for ``on_kill`` and for a cancellation before 3.3).
- A trigger that comes back from a stall as long as half that threshold waits ``STALL_SETTLE_SECONDS`` (for
  Airflow to cancel it, if it was handed over) and reads the checkpoint before its next poll. If another
  trigger wrote one that shows every stream further, the job was handed over: the trigger stands by, polling
  and showing nothing, until Airflow cancels it. Airflow does so at the triggerer's next look at the database,
  but the triggerer's runner learns of it only through the same channel that serves every trigger's XCom
  reads and writes, one at a time: seconds to tens of seconds after a stall, when all of its triggers read
  their checkpoints at once. Standing by, the trigger shows nothing twice however long that takes. Should
  Airflow give the trigger back instead (the other triggerer lost too), it continues from the latest
  checkpoint after ``STAND_BY_FRACTION`` times the threshold.
- A poll that took that long (one in flight when the triggerer froze, or a slow answer) shows what it read
  only once the checkpoint says that no other trigger took the job over meanwhile: otherwise that one showed
  it already, and this one stands by as above.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

if sys.version_info >= (3, 11):
    from asyncio import timeout_at
else:  # aiohttp's own dependency before Python 3.11
    from async_timeout import timeout_at  # type: ignore[import-not-found, unused-ignore]

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import (
    TRIGGER_ON_KILL,
    aget_xcom,
    aget_xcom_to_reply,
    aset_xcom,
    atask_state,
    redact,
    trigger_timed_out,
    triggers_run_inline,
)
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.links.job import LINK_XCOM_KEY
from airflow_provider_azbatch.model.records import TERMINAL_JOB_STATES, NodeTimes
from airflow_provider_azbatch.triggers import account_view, kill
from airflow_provider_azbatch.triggers.output_reads import Reader
from airflow_provider_azbatch.triggers.pool_pulse import PoolPulse
from airflow_provider_azbatch.watching.budget import TokenBucket
from airflow_provider_azbatch.watching.core import Emit, JobWatcher
from airflow_provider_azbatch.watching.drivers import run_async
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS, OutagePolicy, WaitFailed
from airflow_provider_azbatch.watching.output_log import log_emitter
from airflow_provider_azbatch.watching.pool_health import PoolProblem
from airflow_provider_azbatch.watching.preemption import SpotFallbackDue
from airflow_provider_azbatch.watching.state import WatchState

CHECKPOINT_KEY = "azbatch_watch_state"
# Requests one trigger makes at once (the shared client's connection pool bounds all triggers together).
STEP_CONCURRENCY = 8
# No checkpoint is written this soon after the task deferred, so a trigger starting within it reads none.
FRESH_SECONDS = 10.0
# How long a cancelled trigger (triggerer shutdown) may take to write its last checkpoint.
FINAL_CHECKPOINT_SECONDS = 5.0
# A poll this late (a fraction of [triggerer] triggerer_health_check_threshold) looks whether another trigger
# took the job over meanwhile.
STALL_FRACTION = 0.5
# How long a trigger back from such a stall waits before it reads the checkpoint and polls again.
STALL_SETTLE_SECONDS = 5.0
# How long a trigger that found its job handed over stands by for Airflow to cancel it (times the health-check
# threshold) before it goes on from the latest checkpoint.
STAND_BY_FRACTION = 2.0
# The lines of the poll that finds the job over travel in its event up to this size (characters); past it the
# task reads them again from Batch (see PollLines).
EVENT_LINES_CHARS = 64 * 1024
# Where a trigger leaves the watch's final state and its last lines for the task (XCom of the task instance):
# not in the event, which the triggerer logs in full (into the task's log: each line would show twice).
RESULT_KEY = "azbatch_watch_result"
# How long a cancelled trigger waits (before Airflow 3.3) for its check whether the task was killed; past it (or
# cancelled again) the check goes on in the background.
KILL_CHECK_SECONDS = 20.0


_look_budgets: dict[int, TokenBucket] = {}
# Event loops (triggerer processes) whose triggers have asked about a task instance once (see _warm_up_task_questions).
_warmed_up: set[int] = set()
# Checks whether a cancelled trigger's task was killed, in flight (see AzureBatchJobTrigger._end_job_if_killed).
_killing: set[asyncio.Future[None]] = set()


def _until(deadline: float | None) -> contextlib.AbstractAsyncContextManager[Any]:
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


def _health_check_threshold() -> float:
    """``[triggerer] triggerer_health_check_threshold``: how long a triggerer's heartbeat may lapse before
    Airflow hands its triggers to another one."""
    try:
        from airflow.sdk import conf

        return conf.getfloat("triggerer", "triggerer_health_check_threshold", fallback=30.0)
    except Exception:  # outside an Airflow installation, or an unreadable value: Airflow's default
        return 30.0


def pack_result(result: dict[str, Any]) -> str:
    """The watch's final state and last lines as one opaque string (zlib, base64) for an event."""
    return base64.b64encode(zlib.compress(json.dumps(result).encode())).decode()


def unpack_result(packed: str) -> dict[str, Any]:
    value = json.loads(zlib.decompress(base64.b64decode(packed)))
    if not isinstance(value, dict):
        raise ValueError("not a packed watch result")
    return value


class PollLines:
    """The output lines of the poll in progress, shown once it is known not to be the last.

    Those of the last poll (the one that finds the job over) are the task's to show: a triggerer that has not
    written a trigger's last lines to the task's log when it learns that the trigger is over writes them to
    its own log instead (Airflow 3.3.2 closes the task's trigger log then), where the task's log does not show
    them. They go to the task (in XCom, or in the event where XCom cannot be written), which prints them when
    it resumes; not read again from Batch, where they may be gone by then (an auto pool is deleted when its job
    ends, its nodes' files with it).
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._held: list[tuple[str | None, str]] = []

    def __call__(self, task_id: str | None, line: str) -> None:
        self._held.append((task_id, line))

    def show(self) -> None:
        for task_id, line in self._held:
            self._emit(task_id, line)
        self._held.clear()

    def drop(self) -> None:
        self._held.clear()

    def take(self) -> list[tuple[str | None, str]]:
        held, self._held = self._held, []
        return held


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

    async def _write_latest(self) -> None:
        state = self._latest
        if state is None or state == self._written or time.time() < self.not_before:
            return
        if self.max_age is not None and time.time() - self._offered_at > self.max_age:
            return
        self._next_at = time.time() + self.interval
        await self._write(state)
        self._written = state
        self.writes += 1

    async def close(self, *, final: bool) -> None:
        """Stop; with ``final``, write what moved since the last write first (bounded in time)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if final:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._write_latest(), FINAL_CHECKPOINT_SECONDS)


class AzureBatchJobTrigger(BaseTrigger):
    """Fires when the job is over (``done``), at ``deadline`` (``timeout``) or on an error (``error``).

    :param azbatch_conn_id: the ``azbatch`` connection.
    :param watch_state: a :class:`~airflow_provider_azbatch.watching.state.WatchState` as JSON (job id,
        streamed tasks, read positions).
    :param poll_interval: seconds between polls.
    :param deadline: epoch seconds after which a ``timeout`` event fires (the task's execution timeout).
    :param stream_output: print the streamed tasks' output.
    :param max_read_bytes: most bytes read from one output file per poll.
    :param max_outage: seconds of consecutive transient failures before giving up.
    :param terminate_on_kill: terminate the job when a user kills the deferred task (the operator's
        own jobs: yes; a sensor watching someone else's job: no).
    :param deferred_at: epoch seconds when the task deferred (no checkpoint exists for ``FRESH_SECONDS`` after).
    """

    def __init__(
        self,
        azbatch_conn_id: str,
        watch_state: dict[str, Any],
        poll_interval: float = 5.0,
        deadline: float | None = None,
        stream_output: bool = True,
        max_read_bytes: int = 1024 * 1024,
        max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS,
        terminate_on_kill: bool = False,
        deferred_at: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow leaves BaseTrigger.__init__ unannotated
        self.azbatch_conn_id = azbatch_conn_id
        self.watch_state = watch_state
        self.poll_interval = poll_interval
        self.deadline = deadline
        self.stream_output = stream_output
        self.max_read_bytes = max_read_bytes
        self.max_outage = max_outage
        self.terminate_on_kill = terminate_on_kill
        self.deferred_at = deferred_at
        self._state: WatchState | None = None  # the watch's state now (it changes if it catches up)
        self._shown: dict[str, Any] | None = None  # its state after the last poll whose lines were shown
        self._lines: PollLines | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "azbatch_conn_id": self.azbatch_conn_id,
                "watch_state": self.watch_state,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
                "stream_output": self.stream_output,
                "max_read_bytes": self.max_read_bytes,
                "max_outage": self.max_outage,
                "terminate_on_kill": self.terminate_on_kill,
                "deferred_at": self.deferred_at,
            },
        )

    @property
    def job_id(self) -> str:
        return str(self.watch_state["job_id"])

    def _watcher(self, state: WatchState) -> JobWatcher:
        if self._lines is None:
            self._lines = PollLines(log_emitter(self.log))
        return JobWatcher(
            state,
            self._lines,
            stream_output=self.stream_output,
            poll_interval=self.poll_interval,
            max_read_bytes=self.max_read_bytes,
            idle_stream_seconds=config.get_float("idle_stream_interval"),
            partial_line_seconds=config.get_float("partial_line_seconds"),
            look_budget=shared_look_budget(),
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        not_before = (self.deferred_at + FRESH_SECONDS) if self.deferred_at is not None else 0.0
        stall = STALL_FRACTION * _health_check_threshold()
        # A watch offers its state every poll: one older than a poll and a stall means it stalled.
        checkpoints = Checkpoints(
            self._write_checkpoint,
            config.get_float("checkpoint_interval"),
            not_before,
            max_age=self.poll_interval + stall,
        )
        hook = AzureBatchAsyncHook(self.azbatch_conn_id)
        try:
            # Reading the checkpoint may take seconds on a fresh triggerer: a kill meanwhile is a kill too.
            start = await self._starting_state(not_before)
            watcher = self._watcher(WatchState.from_json(start))
            checkpoints.offer(watcher.state.to_json(), written=True)
            async with hook.connected():
                try:
                    # One timer for the whole watch: it ends a sleep at the deadline and cancels a poll in
                    # flight there (a timer per poll would cost every job a timer and a task per poll).
                    async with _until(self.deadline):
                        event = await self._watch(watcher, hook, checkpoints, stall)
                except asyncio.TimeoutError:  # the deadline's, only: _watch turns its own errors into events
                    # A poll cut short shows nothing: the task shows it (from the state its lines were not in).
                    self._drop_poll_lines()
                    event = self._event("timeout", self._shown or watcher.state.to_json())
            event = await self._small(event)
            await self._hold_for_the_scheduler()
        except asyncio.CancelledError:
            # Triggerer shutdown or redistribution, or the task was killed: keep what was shown. The lines of a
            # poll cut short are not: the last offered state, which the final checkpoint writes, has not them.
            self._drop_poll_lines()
            killed = self._after_cancellation()
            await checkpoints.close(final=True)
            if killed is not None:
                # Cancelled again (about every second while it runs), this goes on in the background.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(killed), KILL_CHECK_SECONDS)
            raise
        await checkpoints.close(final=False)
        yield event

    async def _hold_for_the_scheduler(self) -> None:
        """Fire no event within ``[azbatch] min_deferral_seconds`` of the deferral (nor past the deadline).

        Airflow's scheduler learns that the deferring worker exited ("success") from the executor, seconds
        later on a busy scheduler; when the trigger's event has moved the task instance to queued or running
        by then, Airflow 3.0-3.3.2 take that stale success for a task changed externally and fail the task
        (apache/airflow#67287, #72716; only the scheduled variant is fixed, in 3.2.2): a job that ends within
        seconds of the deferral would fail its Airflow task. Triggers run in-line (``airflow dags test``) have
        no such race, and no floor.
        """
        if self.deferred_at is None or triggers_run_inline():
            return
        until = self.deferred_at + config.get_float("min_deferral_seconds")
        if self.deadline is not None:
            until = min(until, self.deadline)
        if until > time.time():
            await asyncio.sleep(until - time.time())

    async def _watch(
        self, watcher: JobWatcher, hook: AzureBatchAsyncHook, checkpoints: Checkpoints, stall: float
    ) -> TriggerEvent:
        """Poll until the job is over or an error ends the watch; the deadline is the caller's. A poll more
        than ``stall`` seconds late (or after one that took that long) first catches up with a checkpoint
        another trigger wrote meanwhile."""
        self._state = state = watcher.state
        self._shown = state.to_json()
        lines = self._lines
        assert lines is not None
        policy = OutagePolicy(self.job_id, self.max_outage)
        limit = asyncio.Semaphore(STEP_CONCURRENCY)
        subscription = await account_view.watch_job(
            self.azbatch_conn_id, self.job_id, self.poll_interval, self.deferred_at
        )
        # The account's output reads (the view's); None: each trigger reads its own output every poll (no view).
        reads = subscription.reads if isinstance(subscription, account_view.Subscription) else None
        # Node samples taken from the view's pool pulse where it lists the pool anyway.
        asks: Any = hook
        if isinstance(subscription, account_view.Subscription):
            asks = _PulsedNodes(hook, subscription.view.pulse)
        try:
            wake_at = time.time()
            # When to look at the job itself (counts, ...) unless the view sees it change first.
            next_look = subscription.first_look_at(wake_at)
            look_every = subscription.job_look_interval()
            changed = False
            warm = False
            while True:
                started = time.time()
                late = started - wake_at
                if late > stall:
                    taken_over = await self._after_stall(state, late)
                    if taken_over is not None:
                        watcher = self._continue_from(taken_over, checkpoints)
                        state = watcher.state
                        changed = True  # a new watcher: it looks at the job first
                    started = time.time()  # what follows is a poll, to be timed as one
                watcher.job_state_watched = subscription.watching
                if isinstance(subscription, account_view.Subscription):
                    requested = subscription.take_look_request()
                    if requested is not None:  # the pool pulse saw its tasks move
                        next_look = min(next_look, requested)
                if changed and _ended_as_listed(subscription, watcher):
                    return self._done(state, lines.take())
                grants = reads.take() if reads is not None else set()
                watcher.output_requests = 0
                try:
                    if reads is None:
                        next_look = started + subscription.job_look_interval()
                        done = await run_async(watcher.step(time.time()), asks, limit)
                    elif (changed or started >= next_look) and not watcher.job_over():
                        done = await run_async(watcher.look(time.time(), grants), asks, limit)
                        look_every = _look_every(subscription, watcher, look_every)
                        next_look = time.time() + look_every
                    else:  # only output: the view watches the job's state meanwhile
                        done = await run_async(watcher.read(time.time(), grants), asks, limit)
                    overran = time.time() - started  # a stall can come during a poll
                except SpotFallbackDue as due:
                    lines.show()
                    return self._fallback(state, str(due))
                except PoolProblem as problem:
                    lines.show()
                    return self._error(state, str(problem), permanent=True, pool_problem=problem)
                except Exception as exc:
                    lines.show()  # what the poll read before its error is in the state
                    try:
                        delay = policy.delay_after(exc, time.monotonic())
                    except WaitFailed as failed:
                        return self._error(state, str(failed), permanent=failed.permanent)
                    self.log.warning(
                        "Transient error from the Batch service (%s); retrying in %.1f s", describe_error(exc), delay
                    )
                    wake_at = time.time() + delay
                    next_look = 0.0  # the job itself at the next poll
                    changed = False
                    await asyncio.sleep(delay)
                    continue
                finally:
                    if reads is not None:
                        reads.charge(watcher.output_requests, len(grants))
                        reads.offer(watcher.read_schedules(time.time()))
                policy.succeeded()
                if overran > stall:  # it may have spanned a stall: see the module docstring
                    taken_over = await self._after_stall(WatchState.from_json(self._shown), overran)
                    if taken_over is not None:
                        lines.drop()
                        watcher = self._continue_from(taken_over, checkpoints)
                        state = watcher.state
                        changed = True
                        wake_at = time.time()
                        continue
                if done:
                    return self._done(state, lines.take())
                lines.show()
                if not warm:
                    # After the first poll: on 3.2 the triggerer's requests wait for the first one's slow reply,
                    # the connection this watch reads first among them.
                    self._warm_up_task_questions()
                    warm = True
                self._shown = state.to_json()
                checkpoints.offer(self._shown)
                if reads is not None:
                    self._say_if_late(reads)
                timeout = next_look - time.time()
                if reads is None:
                    if watcher.following():
                        timeout = min(timeout, self.poll_interval)
                elif watcher.job_over() or watcher.unfinished_output():
                    timeout = min(timeout, self.poll_interval)
                else:
                    upcoming = reads.next_eligible()
                    if upcoming is not None and upcoming <= next_look + self.poll_interval:
                        # Reads are due about then: the look waits for them (a poll at most) and comes with them.
                        timeout = max(timeout, 0.0) + self.poll_interval
                wake_at = time.time() + max(timeout, 0.0)
                changed = await subscription.wait(timeout)
        finally:
            await subscription.close()

    def _say_if_late(self, reads: Reader) -> None:
        """Tell the task's log when the account's output budget holds this job's output back (now and then)."""
        late = reads.lateness_report(time.time())
        if late is None:
            return
        self.log.info(
            "Batch job %s: new output was read up to %.0f s later than every poll_interval (%g s): the Batch "
            "account's output reads ([azbatch] output_requests_per_second = %g) are shared by %d followed files of "
            "this triggerer, the fastest-growing first",
            self.job_id,
            late,
            self.poll_interval,
            reads.budget,
            reads.followed(),
        )

    async def _small(self, event: TriggerEvent) -> TriggerEvent:
        """The event with the watch's state and last lines left in XCom (``RESULT_KEY``) for the task: only what
        Airflow must see travels in it. Where XCom cannot be written (no task instance: a trigger run on its
        own; Airflow before 3.2), the event carries them, as the task reads either."""
        payload = dict(event.payload)
        result = {key: payload.pop(key) for key in ("watch_state", "lines") if key in payload}
        where = self._ti_coordinates()
        if where is None:
            return event
        try:
            await asyncio.wait_for(aset_xcom(RESULT_KEY, result, **where), FINAL_CHECKPOINT_SECONDS)
        except Exception as exc:
            # Packed: the triggerer's log of the event does not show the lines a second time.
            self.log.debug("Result not stored as XCom (%s): the event carries it, packed", exc)
            payload["packed"] = pack_result(result)
            return TriggerEvent(payload)
        payload["result"] = RESULT_KEY
        return TriggerEvent(payload)

    def _drop_poll_lines(self) -> None:
        if self._lines is not None:
            self._lines.drop()

    def _continue_from(self, taken_over: WatchState, checkpoints: Checkpoints) -> JobWatcher:
        """A watcher going on from the other trigger's checkpoint, which counts as shown and written."""
        watcher = self._watcher(taken_over)
        self._state = watcher.state
        self._shown = watcher.state.to_json()
        checkpoints.offer(self._shown, written=True)
        return watcher

    async def _after_stall(self, shown: WatchState, late: float) -> WatchState | None:
        """After a stall: the checkpoint to go on from if another trigger took the job over meanwhile (it showed
        every stream further than ``shown``), once this one has stood by; None if none did."""
        # Give Airflow a moment to cancel this trigger if it was handed over, and the other trigger one to
        # checkpoint, before reading what that one showed.
        await asyncio.sleep(STALL_SETTLE_SECONDS)
        taken_over = await self._checkpoint_past(shown)
        if taken_over is None:
            return None
        return await self._stand_by(taken_over, late)

    async def _checkpoint_past(self, state: WatchState) -> WatchState | None:
        """After a stall: the checkpoint, if another trigger (the one Airflow handed the job to meanwhile) wrote
        one showing every stream further than ``state``."""
        saved = await self._read_checkpoint()
        if saved is None:
            return None
        theirs = WatchState.from_json(saved)
        if not theirs.shown_past(state):
            return None
        return theirs

    async def _stand_by(self, theirs: WatchState, late: float) -> WatchState:
        """The job was handed to another trigger while this one stalled: poll and show nothing until Airflow
        cancels this one; if it has not after the bound (the job came back to this triggerer), the latest
        checkpoint to go on from."""
        bound = STAND_BY_FRACTION * _health_check_threshold()
        self.log.info(
            "This triggerer stalled for %.0f s and another one showed Batch job %s output meanwhile: standing by "
            "until Airflow cancels this trigger (at most %.0f s)",
            late,
            self.job_id,
            bound,
        )
        await asyncio.sleep(bound)
        newest = await self._checkpoint_past(theirs)
        self.log.info(
            "Batch job %s: this trigger was not cancelled within %.0f s (the job is this triggerer's again): "
            "continuing from the latest checkpoint",
            self.job_id,
            bound,
        )
        return newest or theirs

    def _done(self, state: WatchState, last_lines: list[tuple[str | None, str]]) -> TriggerEvent:
        """The job is over: the event carries the last poll's lines (see PollLines), or, when they are too many
        for an event, the state from before that poll, so that the task reads them again."""
        if sum(len(line) for _, line in last_lines) <= EVENT_LINES_CHARS:
            return self._event("done", state.to_json(), lines=last_lines)
        return self._event("done", self._shown or state.to_json())

    def _event(
        self, status: str, state: dict[str, Any], lines: list[tuple[str | None, str]] | None = None
    ) -> TriggerEvent:
        payload: dict[str, Any] = {"status": status, "job_id": self.job_id, "watch_state": state}
        if lines:
            # Stored as the task's next_kwargs, not written through the log's masking: masked here.
            payload["lines"] = [[task_id, redact(line)] for task_id, line in lines]
        return TriggerEvent(payload)

    def _fallback(self, state: WatchState, reason: str) -> TriggerEvent:
        """The job should move to dedicated nodes: the task does it on a worker, then defers again."""
        payload = {"status": "fallback", "job_id": self.job_id, "message": reason, "watch_state": state.to_json()}
        return TriggerEvent(payload)

    def _error(
        self, state: WatchState, message: str, *, permanent: bool, pool_problem: PoolProblem | None = None
    ) -> TriggerEvent:
        payload: dict[str, Any] = {
            "status": "error",
            "job_id": self.job_id,
            "message": message,
            "permanent": permanent,
            "watch_state": state.to_json(),
        }
        if pool_problem is not None:
            payload["pool_problem"] = True
            # The nodes at fault: the task uploads their Batch service logs before it ends the job.
            payload["pool_problem_nodes"] = {"pool_id": pool_problem.pool_id, "nodes": list(pool_problem.nodes)}
        return TriggerEvent(payload)

    def _warm_up_task_questions(self) -> None:
        """Ask the triggerer about this trigger's task instance once per triggerer process, in the background.

        A triggerer answers its first such question slowly (it builds its execution API then: 5-8 s, 30 s on a
        busy 2-core machine), and a killed task's trigger asks one (see :mod:`.kill`): asked at the first trigger's
        start, that cost is not paid at the first kill. Not before the trigger's first poll: on 3.2 the triggerer
        answers its requests in order, and the first poll's (the connection) would wait for that slow one. Not on
        3.3+, where ``on_kill`` asks nothing.
        """
        if not self.terminate_on_kill or TRIGGER_ON_KILL or self._ti_coordinates() is None or triggers_run_inline():
            return
        loop_id = id(asyncio.get_running_loop())
        if loop_id in _warmed_up:
            return
        _warmed_up.add(loop_id)
        work = asyncio.ensure_future(self._warm_up())
        _killing.add(work)
        work.add_done_callback(_killing.discard)

    async def _warm_up(self) -> None:
        try:
            await self._task_state()
        except Exception as exc:
            self.log.debug("The triggerer did not answer about the task instance (%s)", describe_error(exc))

    def _after_cancellation(self) -> asyncio.Future[None] | None:
        """Before Airflow 3.3 (no ``on_kill``): a cancelled trigger finds out whether its task was killed, and
        terminates the job if so (see :mod:`.kill`); the work runs on its own, started here."""
        if not self.terminate_on_kill or TRIGGER_ON_KILL or triggers_run_inline():
            return None
        return self._start_kill_check()

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked the deferred task failed/success or cleared it; stop the job we submitted.

        3.3 also calls this when the trigger was handed to another triggerer (this one's heartbeat lapsed): the
        task is still deferred then, and the job goes on under the other trigger (see :mod:`.kill`).
        """
        if self.terminate_on_kill:
            await self._end_job_if_killed()

    async def _end_job_if_killed(self) -> None:
        """Terminate the job if the task was killed (see :mod:`.kill`), however often this is cancelled meanwhile.

        The triggerer repeats its cancellation about every second until the trigger is over, which would cancel
        this too: the work is shielded, and finishes even when this returns early.
        """
        await asyncio.shield(self._start_kill_check())

    def _start_kill_check(self) -> asyncio.Future[None]:
        work = asyncio.ensure_future(self._terminate_if_killed())
        _killing.add(work)  # the loop keeps only weak references to tasks
        work.add_done_callback(_killing.discard)
        return work

    async def _terminate_if_killed(self) -> None:
        try:
            verdict = kill.decide(self.job_id, self._try_number(), await self._kill_facts())
        except Exception as exc:
            # Rather leave a job running than kill one that another trigger watches.
            self.log.warning(
                "Batch job %s was not terminated: the task instance's state could not be read (%s); "
                "terminate the job yourself if the task was killed",
                self.job_id,
                describe_error(exc),
            )
            return
        if not verdict.terminate:
            self.log.info("%s", verdict.why)
            return
        hook = AzureBatchAsyncHook(self.azbatch_conn_id)
        try:
            async with hook.connected():
                # A trigger that was moved may run on two triggerers a moment: both are told of the kill.
                status = await hook.get_job_status(self.job_id)
                if status is None or status.state in TERMINAL_JOB_STATES:
                    self.log.info("Batch job %s has ended already (the Airflow task was killed)", self.job_id)
                    return
                await hook.terminate_job(self.job_id, "AirflowTaskKilled")
        except Exception as exc:
            self.log.warning("Could not terminate Batch job %s: %s", self.job_id, describe_error(exc))
            return
        self.log.info("Terminated Batch job %s (the Airflow task was killed: %s)", self.job_id, verdict.why)

    def _try_number(self) -> int | None:
        ti = self.task_instance
        value = getattr(ti, "try_number", None) if ti is not None else None
        return value if isinstance(value, int) else None

    async def _kill_facts(self) -> kill.KillFacts:
        """What became of the task instance (read in this order: a newer try records its job before it defers)."""
        if trigger_timed_out(self):
            return kill.KillFacts(task_state="unknown", timed_out=True)
        task_state = await self._task_state()
        if task_state is None:  # no task instance: a trigger run on its own, whose caller cancelled it
            return kill.KillFacts(task_state="none")
        return kill.KillFacts(task_state=task_state, claim=await self._job_claim())

    # -- checkpoints (best effort: a triggerer without XCom access starts from the kwargs) ---------------
    def _ti_coordinates(self) -> dict[str, Any] | None:
        ti = self.task_instance
        if ti is None:
            return None
        return {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id, "map_index": ti.map_index}

    async def _task_state(self) -> str | None:
        """The task instance's state now, as the triggerer's execution API reads it (None: the trigger runs
        without a task instance, outside a triggerer)."""
        where = self._ti_coordinates()
        if where is None:
            return None
        return await atask_state(**where)

    async def _job_claim(self) -> dict[str, Any] | None:
        """What the try that last submitted or reattached to a job for the task instance recorded (XCom
        ``azbatch_job``: its job and try number); None when there is none, or it cannot be read."""
        where = self._ti_coordinates()
        if where is None:
            return None
        try:
            claim = await aget_xcom_to_reply(LINK_XCOM_KEY, **where)
        except Exception as exc:
            self.log.debug("The task instance's job record was not read (%s): its state decides alone", exc)
            return None
        return claim if isinstance(claim, dict) else None

    async def _read_checkpoint(self) -> dict[str, Any] | None:
        where = self._ti_coordinates()
        if where is None:
            return None
        try:
            saved = await aget_xcom(CHECKPOINT_KEY, **where)
        except Exception as exc:
            self.log.debug("No checkpoint read (%s)", exc)
            return None
        return saved if isinstance(saved, dict) and saved.get("job_id") == self.job_id else None

    async def _starting_state(self, not_before: float) -> dict[str, Any]:
        """The kwargs' state, or a newer checkpoint. None can exist before ``not_before``: no read then."""
        if time.time() < not_before:
            return self.watch_state
        saved = await self._read_checkpoint()
        if saved is None:
            return self.watch_state
        self.log.info("Resuming Batch job %s output from the last checkpoint", self.job_id)
        return saved

    async def _write_checkpoint(self, state: dict[str, Any]) -> None:
        where = self._ti_coordinates()
        if where is None:
            return
        try:
            await aset_xcom(CHECKPOINT_KEY, state, **where)
        except Exception as exc:
            self.log.debug("Checkpoint not written (%s)", exc)


def _ended_as_listed(subscription: account_view.Subscription | account_view.OwnLooks, watcher: JobWatcher) -> bool:
    """The view listed the job as completed (nothing more can happen to it): over, without a look at it, when no
    output is left to read. The task reads the final counts itself when it resumes."""
    change = getattr(subscription, "last_change", None)
    if change is None or change.state != "completed":
        return False
    watcher.state.job_state = "completed"
    return watcher.job_over() and not watcher.following() and not watcher.unfinished_output()


def _look_every(
    subscription: account_view.Subscription | account_view.OwnLooks, watcher: JobWatcher, every: float
) -> float:
    """How long after this look the next one is (the view reports state changes meanwhile): the shortest
    interval while anything moves, tasks wait for nodes or streamed tasks run; after a look at which nothing
    moved, as long as the pool pulse allows where it covers the job's pool (it tells the trigger when the job's
    tasks move: :mod:`airflow_provider_azbatch.triggers.pool_pulse`), twice as long as before otherwise."""
    shortest = subscription.job_look_interval()
    if not subscription.watching or watcher.last_look_moved or watcher.waiting_for_nodes() or watcher.following():
        # A streamed task's end must be seen before its node goes (an auto pool's goes with the job): its last
        # output is read then.
        if isinstance(subscription, account_view.Subscription):
            subscription.stir()
        return shortest
    pool_id = watcher.state.pool_id
    if isinstance(subscription, account_view.Subscription) and pool_id is not None and watcher.state.spot is None:
        # (A Spot job's fallback is due by time, not by what its nodes show: it keeps its own cadence.)
        rest = subscription.rest_on_pulse(pool_id)
        if rest is not None:
            return rest
    return min(account_view.MAX_JOB_LOOK_SECONDS, max(shortest, 2 * every))


class _PulsedNodes:
    """The trigger's hook, whose pool node listings come from the account view's pool pulse when it listed the
    pool recently (a thousand jobs on one pool sample its nodes for their idle time at one listing's cost)."""

    def __init__(self, hook: AzureBatchAsyncHook, pulse: PoolPulse) -> None:
        self._hook = hook
        self._pulse = pulse

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hook, name)

    async def list_pool_nodes(self, pool_id: str) -> list[NodeTimes] | None:
        listed = self._pulse.nodes(pool_id, time.time())
        if listed is not None:
            return listed
        return await self._hook.list_pool_nodes(pool_id)

"""``AzureBatchJobTrigger``: waits for a Batch job in the triggerer, streaming its tasks' output.

The trigger coordinates; each concern has its own module:

- the watch loop (:mod:`.watch_loop`): polls the job with the watch core shared with the synchronous operator,
  between the account view's listings (:mod:`.account_view`, :mod:`.subscription`);
- checkpoints (:mod:`.checkpoints`): where the watch got to, in XCom, so that every line is printed once;
- handover (:mod:`.handover`): a trigger back from a stall stands by while another triggerer has its job;
- kill (:mod:`.kill`): a cancelled trigger terminates its job only when its task was killed;
- what it fires (:mod:`.watch_events`): only what Airflow must see; the watch's final state and last lines wait
  for the task in XCom.

Deadlines hold whatever the load: the sleep ends at the deadline and a poll still in flight then is cancelled, so
the ``timeout`` event fires within moments of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.triggers import checkpoints as checkpointing
from airflow_provider_azbatch.triggers import handover, kill, watch_events
from airflow_provider_azbatch.triggers.checkpoints import CHECKPOINT_KEY, FRESH_SECONDS, Checkpoints
from airflow_provider_azbatch.triggers.watch_events import PollLines
from airflow_provider_azbatch.triggers.watch_loop import WatchLoop, shared_look_budget, until
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS
from airflow_provider_azbatch.watching.output_log import log_emitter
from airflow_provider_azbatch.watching.state import WatchState

__all__ = ["CHECKPOINT_KEY", "AzureBatchJobTrigger"]


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
        stall = handover.stall_seconds()
        # A watch offers its state every poll: one older than a poll and a stall means it stalled.
        checkpoints = Checkpoints(
            self._write_checkpoint,
            config.get_float("checkpoint_interval"),
            not_before,
            max_age=self.poll_interval + stall,
        )
        try:
            event = await self._watch_until_the_deadline(not_before, checkpoints, stall)
            event = await watch_events.leave_result(event, self._ti_coordinates(), self.log)
            await watch_events.hold_for_the_scheduler(self.deferred_at, self.deadline)
        except asyncio.CancelledError:
            # Triggerer shutdown or redistribution, or the task was killed: keep what was shown. The lines of a
            # poll cut short are not: the last offered state, which the final checkpoint writes, has not them.
            self._drop_poll_lines()
            # The last checkpoint first: a triggerer answers its triggers' requests in order, and one that stops
            # (3.0-3.2 cancel on a stop as on a kill) serves only the first ones before it exits.
            answered = await checkpoints.close(final=True)
            killed = kill.check_after_cancellation(self)
            if killed is not None:
                await kill.hold_for_the_check(killed, answered, self._read_checkpoint)
            raise
        await checkpoints.close(final=False)
        yield event

    async def _watch_until_the_deadline(
        self, not_before: float, checkpoints: Checkpoints, stall: float
    ) -> TriggerEvent:
        # Reading the checkpoint may take seconds on a fresh triggerer: a kill meanwhile is a kill too.
        start = await checkpointing.starting_state(self.watch_state, not_before, self._read_checkpoint, self.log)
        watcher = self._watcher(WatchState.from_json(start))
        checkpoints.offer(watcher.state.to_json(), written=True)
        hook = AzureBatchAsyncHook(self.azbatch_conn_id)
        async with hook.connected():
            try:
                # One timer for the whole watch: it ends a sleep at the deadline and cancels a poll in flight
                # there (a timer per poll would cost every job a timer and a task per poll).
                async with until(self.deadline):
                    return await self._watch(watcher, hook, checkpoints, stall)
            except asyncio.TimeoutError:  # the deadline's, only: the watch turns its own errors into events
                # A poll cut short shows nothing: the task shows it (from the state its lines were not in).
                self._drop_poll_lines()
                return watch_events.event(self.job_id, "timeout", self._shown or watcher.state.to_json())

    async def _watch(
        self, watcher: JobWatcher, hook: AzureBatchAsyncHook, checkpoints: Checkpoints, stall: float
    ) -> TriggerEvent:
        """Poll until the job is over or an error ends the watch (:mod:`.watch_loop`)."""
        return await WatchLoop(self, watcher, hook, checkpoints, stall).run()

    def _drop_poll_lines(self) -> None:
        if self._lines is not None:
            self._lines.drop()

    async def _stand_by(self, theirs: WatchState, late: float) -> WatchState:
        """The job was handed to another trigger while this one stalled (:mod:`.handover`)."""
        return await handover.stand_by(self._read_checkpoint, self.log, theirs, late)

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked the deferred task failed/success or cleared it; stop the job we submitted.

        3.3 also calls this when the trigger was handed to another triggerer (this one's heartbeat lapsed): the
        task is still deferred then, and the job goes on under the other trigger (see :mod:`.kill`).
        """
        if self.terminate_on_kill:
            await kill.end_job_if_killed(self)

    # -- what the triggerer answers about the task instance (XCom, state) -----------------------------------
    def _ti_coordinates(self) -> dict[str, Any] | None:
        ti = self.task_instance
        if ti is None:
            return None
        return {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id, "map_index": ti.map_index}

    def _try_number(self) -> int | None:
        """The try of the task instance this trigger watches for (None: unknown)."""
        ti = self.task_instance
        value = getattr(ti, "try_number", None) if ti is not None else None
        return value if isinstance(value, int) else None

    async def _task_state(self) -> str | None:
        return await kill.task_state(self._ti_coordinates())

    async def _job_claim(self) -> dict[str, Any] | None:
        return await kill.job_claim(self._ti_coordinates(), self.log)

    async def _read_checkpoint(self) -> dict[str, Any] | None:
        return await checkpointing.read_checkpoint(self._ti_coordinates(), self.job_id, self.log)

    async def _write_checkpoint(self, state: dict[str, Any]) -> None:
        await checkpointing.write_checkpoint(self._ti_coordinates(), state, self.log)

"""``AzureBatchJobTrigger``: waits for a Batch job in the triggerer, streaming its tasks' output.

Uses the native ``azure.batch.aio`` client (shared per connection in the triggerer process). An idle
poll costs one request (task counts); output is read only for streamed tasks that are running.
Transient errors (throttling, 5xx, dropped connections) are retried with backoff honouring
``Retry-After``; an outage longer than ``max_outage`` seconds, or a permanent error (authentication,
job deleted), ends the wait with an error event that says why.

Every line is printed once: the read position of each output stream travels in the trigger's kwargs
and events, and is checkpointed (XCom ``azbatch_watch_state``) after each poll, so a triggerer
restart resumes from the last checkpoint. Lines read after the last checkpoint and before a crash
are printed again by the next triggerer (at most one poll's worth); none is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_azbatch.hooks.async_clients import connection_settings, shared_client
from airflow_provider_azbatch.hooks.batch import describe_error
from airflow_provider_azbatch.utils.errors import Backoff, is_transient, retry_after_seconds
from airflow_provider_azbatch.utils.job_watch import JobWatcher, WatchState, awatch_step
from airflow_provider_azbatch.utils.pool_health import PoolProblem

CHECKPOINT_KEY = "azbatch_watch_state"
DEFAULT_MAX_OUTAGE_SECONDS = 600.0


class AzureBatchJobTrigger(BaseTrigger):
    """Fires when the job is over (``done``), at ``deadline`` (``timeout``) or on an error (``error``).

    :param azbatch_conn_id: the ``azbatch`` connection.
    :param watch_state: a :class:`~airflow_provider_azbatch.utils.job_watch.WatchState` as JSON (job id,
        streamed tasks, read positions).
    :param poll_interval: seconds between polls.
    :param deadline: epoch seconds after which a ``timeout`` event fires (the task's execution timeout).
    :param stream_output: print the streamed tasks' output.
    :param max_read_bytes: most bytes read from one output file per poll.
    :param max_outage: seconds of consecutive transient failures before giving up.
    :param terminate_on_kill: terminate the job when a user kills the deferred task (the operator's
        own jobs: yes; a sensor watching someone else's job: no).
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
    ) -> None:
        super().__init__()
        self.azbatch_conn_id = azbatch_conn_id
        self.watch_state = watch_state
        self.poll_interval = poll_interval
        self.deadline = deadline
        self.stream_output = stream_output
        self.max_read_bytes = max_read_bytes
        self.max_outage = max_outage
        self.terminate_on_kill = terminate_on_kill

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
            },
        )

    @property
    def job_id(self) -> str:
        return self.watch_state["job_id"]

    def _emit(self, line: str) -> None:
        self.log.info("%s", line)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        state = WatchState.from_json(await self._latest_state())
        watcher = JobWatcher(state, stream_output=self.stream_output)
        backoff = Backoff()
        outage_since: float | None = None
        saved = state.to_json()
        fallback = await self._log_reader(state)
        async with shared_client(self.azbatch_conn_id) as client:
            while True:
                if self.deadline is not None and time.time() >= self.deadline:
                    yield TriggerEvent({"status": "timeout", "job_id": self.job_id, "watch_state": state.to_json()})
                    return
                try:
                    done = await awatch_step(
                        client, watcher, self._emit, max_bytes=self.max_read_bytes, fallback=fallback
                    )
                except PoolProblem as problem:
                    yield self._error(state, str(problem), permanent=True, pool_problem=True)
                    return
                except Exception as exc:
                    cause = describe_error(exc)
                    if not is_transient(exc):
                        yield self._error(state, f"Batch job {self.job_id}: {cause}", permanent=True)
                        return
                    now = time.monotonic()
                    outage_since = outage_since or now
                    if now - outage_since > self.max_outage:
                        yield self._error(
                            state,
                            f"Batch job {self.job_id}: the Batch service kept failing for "
                            f"{int(now - outage_since)} s (max_outage {int(self.max_outage)} s); last error: {cause}",
                            permanent=False,
                        )
                        return
                    delay = backoff.next_delay(retry_after_seconds(exc))
                    self.log.warning("Transient error from the Batch service (%s); retrying in %.1f s", cause, delay)
                    await asyncio.sleep(delay)
                    continue
                outage_since = None
                backoff.reset()
                current = state.to_json()
                if current != saved:
                    await self._checkpoint(current)
                    saved = current
                if done:
                    yield TriggerEvent({"status": "done", "job_id": self.job_id, "watch_state": current})
                    return
                await asyncio.sleep(self.poll_interval)

    def _error(self, state: WatchState, message: str, *, permanent: bool, pool_problem: bool = False) -> TriggerEvent:
        payload = {
            "status": "error",
            "job_id": self.job_id,
            "message": message,
            "permanent": permanent,
            "watch_state": state.to_json(),
        }
        if pool_problem:
            payload["pool_problem"] = True
        return TriggerEvent(payload)

    async def _log_reader(self, state: WatchState) -> Any:
        """Reads logs uploaded to Blob when a task's node is gone (only if the job uploads them)."""
        if not state.log_location:
            return None
        from airflow_provider_azbatch.hooks.storage import AsyncBlobLogReader, BlobStorage, LogLocation

        settings = await connection_settings(self.azbatch_conn_id)
        storage = BlobStorage.from_settings(settings, "Reading uploaded task logs")
        location = LogLocation.from_json(state.log_location)
        assert location is not None
        return AsyncBlobLogReader(storage, location)

    async def on_kill(self) -> None:
        """A user marked the deferred task failed/success or cleared it: stop the job we submitted."""
        if not self.terminate_on_kill:
            return
        from azure.batch.models._models import BatchJobTerminateOptions

        async with shared_client(self.azbatch_conn_id) as client:
            try:
                await client.begin_terminate_job(
                    self.job_id, BatchJobTerminateOptions(termination_reason="AirflowTaskKilled")
                )
            except Exception as exc:
                self.log.warning("Could not terminate Batch job %s: %s", self.job_id, describe_error(exc))
                return
        self.log.info("Terminated Batch job %s (the Airflow task was killed)", self.job_id)

    # -- checkpoints (best effort: a triggerer without XCom access just starts from the kwargs) ----------
    def _ti_coordinates(self) -> dict[str, Any] | None:
        ti = self.task_instance
        if ti is None:
            return None
        return {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id, "map_index": ti.map_index}

    async def _latest_state(self) -> dict[str, Any]:
        where = self._ti_coordinates()
        if where is None:
            return self.watch_state
        try:
            from airflow.sdk.bases.xcom import BaseXCom

            saved = await BaseXCom.aget_one(key=CHECKPOINT_KEY, **where)
        except Exception as exc:
            self.log.debug("No checkpoint read (%s)", exc)
            return self.watch_state
        if isinstance(saved, dict) and saved.get("job_id") == self.job_id:
            self.log.info("Resuming Batch job %s output from the last checkpoint", self.job_id)
            return saved
        return self.watch_state

    async def _checkpoint(self, state: dict[str, Any]) -> None:
        where = self._ti_coordinates()
        if where is None:
            return
        try:
            from airflow.sdk.bases.xcom import BaseXCom

            await BaseXCom.aset(CHECKPOINT_KEY, state, **where)
        except Exception as exc:
            self.log.debug("Checkpoint not written (%s)", exc)

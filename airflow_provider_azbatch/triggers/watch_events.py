"""What the job trigger fires, and what it leaves for the task beside it.

The event carries only what Airflow must see: the triggerer logs it in full, into the task's log. The watch's
final state and the lines of its last poll wait for the task in XCom (``RESULT_KEY``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import zlib
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import TriggerEvent

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import aset_xcom, redact, triggers_run_inline
from airflow_provider_azbatch.triggers.checkpoints import FINAL_CHECKPOINT_SECONDS

if TYPE_CHECKING:
    from airflow_provider_azbatch.triggers.checkpoints import Logger
    from airflow_provider_azbatch.watching.core import Emit
    from airflow_provider_azbatch.watching.pool_health import PoolProblem
    from airflow_provider_azbatch.watching.state import WatchState

# The lines of the poll that finds the job over travel in its event up to this size (characters); past it the
# task reads them again from Batch (see PollLines).
EVENT_LINES_CHARS = 64 * 1024
# Where a trigger leaves the watch's final state and its last lines for the task (XCom of the task instance):
# not in the event, which the triggerer logs in full (into the task's log: each line would show twice).
RESULT_KEY = "azbatch_watch_result"

Lines = list[tuple[str | None, str]]


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
        self._held: Lines = []

    def __call__(self, task_id: str | None, line: str) -> None:
        self._held.append((task_id, line))

    def show(self) -> None:
        for task_id, line in self._held:
            self._emit(task_id, line)
        self._held.clear()

    def drop(self) -> None:
        self._held.clear()

    def take(self) -> Lines:
        held, self._held = self._held, []
        return held


def event(job_id: str, status: str, state: dict[str, Any], lines: Lines | None = None) -> TriggerEvent:
    payload: dict[str, Any] = {"status": status, "job_id": job_id, "watch_state": state}
    if lines:
        # Stored as the task's next_kwargs, not written through the log's masking: masked here.
        payload["lines"] = [[task_id, redact(line)] for task_id, line in lines]
    return TriggerEvent(payload)


def done(job_id: str, state: WatchState, last_lines: Lines, shown: dict[str, Any] | None) -> TriggerEvent:
    """The job is over: the event carries the last poll's lines (see PollLines), or, when they are too many
    for an event, the state from before that poll (``shown``), so that the task reads them again."""
    if sum(len(line) for _, line in last_lines) <= EVENT_LINES_CHARS:
        return event(job_id, "done", state.to_json(), lines=last_lines)
    return event(job_id, "done", shown or state.to_json())


def fallback(job_id: str, state: WatchState, reason: str) -> TriggerEvent:
    """The job should move to dedicated nodes: the task does it on a worker, then defers again."""
    return TriggerEvent({"status": "fallback", "job_id": job_id, "message": reason, "watch_state": state.to_json()})


def error(
    job_id: str, state: WatchState, message: str, *, permanent: bool, pool_problem: PoolProblem | None = None
) -> TriggerEvent:
    payload: dict[str, Any] = {
        "status": "error",
        "job_id": job_id,
        "message": message,
        "permanent": permanent,
        "watch_state": state.to_json(),
    }
    if pool_problem is not None:
        payload["pool_problem"] = True
        # The nodes at fault: the task uploads their Batch service logs before it ends the job.
        payload["pool_problem_nodes"] = {"pool_id": pool_problem.pool_id, "nodes": list(pool_problem.nodes)}
    return TriggerEvent(payload)


async def leave_result(fired: TriggerEvent, where: dict[str, Any] | None, log: Logger) -> TriggerEvent:
    """The event with the watch's state and last lines left in XCom (``RESULT_KEY``) for the task: only what
    Airflow must see travels in it. Where XCom cannot be written (no task instance: a trigger run on its
    own; Airflow before 3.2), the event carries them, as the task reads either."""
    payload = dict(fired.payload)
    result = {key: payload.pop(key) for key in ("watch_state", "lines") if key in payload}
    if where is None:
        return fired
    try:
        await asyncio.wait_for(aset_xcom(RESULT_KEY, result, **where), FINAL_CHECKPOINT_SECONDS)
    except Exception as exc:
        # Packed: the triggerer's log of the event does not show the lines a second time.
        log.debug("Result not stored as XCom (%s): the event carries it, packed", exc)
        payload["packed"] = pack_result(result)
        return TriggerEvent(payload)
    payload["result"] = RESULT_KEY
    return TriggerEvent(payload)


async def hold_for_the_scheduler(deferred_at: float | None, deadline: float | None) -> None:
    """Fire no event within ``[azbatch] min_deferral_seconds`` of the deferral (nor past the deadline).

    Airflow's scheduler learns that the deferring worker exited ("success") from the executor, seconds
    later on a busy scheduler; when the trigger's event has moved the task instance to queued or running
    by then, Airflow 3.0-3.3.2 take that stale success for a task changed externally and fail the task
    (apache/airflow#67287, #72716; only the scheduled variant is fixed, in 3.2.2): a job that ends within
    seconds of the deferral would fail its Airflow task. Triggers run in-line (``airflow dags test``) have
    no such race, and no floor.
    """
    if deferred_at is None or triggers_run_inline():
        return
    until = deferred_at + config.get_float("min_deferral_seconds")
    if deadline is not None:
        until = min(until, deadline)
    if until > time.time():
        await asyncio.sleep(until - time.time())

"""``AzureBatchJobCompletedTrigger``: an event trigger for Airflow's asset watchers that fires once per Batch job
completed in an account, whoever submitted it (TorchX, the CLI, the portal, another Airflow).

It listens to the account view (:mod:`.account_view`): the one periodic listing of the account's changed jobs that
the triggerer's deferred jobs share, with each job's metadata, pool and execution information besides. A watcher
adds no request a poll, however many watch the account; for each completed job that passes the filters the
listing can answer (job id prefix, metadata, pool), it lists the job's tasks once (their exit codes, and so the
outcome the ``outcome`` filter reads), and fires.

Each job fires once across restarts and handovers: the watcher keeps a cursor
(:mod:`airflow_provider_azbatch.job_events.cursor`) in an Airflow Variable named after the watcher's arguments, and a
restarted watcher asks the view to reach back to its watermark. The guarantee and its limits:
docs/howto/job-events.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import Any, Protocol

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_azbatch.compat import to_reply
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.job_events.cursor import Completions, Cursor
from airflow_provider_azbatch.job_events.filters import JobFilter
from airflow_provider_azbatch.job_events.outcome import job_event, outcome_of
from airflow_provider_azbatch.model.records import JobChange, service_time
from airflow_provider_azbatch.triggers import account_view

# The fields of each listed job the filters and the event need (one ``$select`` with the view's own).
LISTED_FIELDS = ("metadata", "executionInfo", "poolInfo")
# The prefix of the Airflow Variables that hold the watchers' cursors.
CURSOR_VARIABLE_PREFIX = "azbatch_job_events."
# How long a watcher waits before it tries again to read its cursor (the triggerer's supervisor did not answer).
CURSOR_RETRY_SECONDS = 5.0


class CursorStore(Protocol):
    """Where a watcher keeps its cursor (JSON text) between runs."""

    async def load(self, key: str) -> str | None: ...

    async def save(self, key: str, value: str) -> None: ...


class VariableStore:
    """Airflow Variables, asked through the triggerer (every Airflow 3 line serves them to triggers)."""

    async def load(self, key: str) -> str | None:
        from airflow.sdk import Variable

        value = await to_reply(Variable.get, key, default=None)
        return None if value is None else str(value)

    async def save(self, key: str, value: str) -> None:
        from airflow.sdk import Variable

        await to_reply(Variable.set, key, value, description="The cursor of an Azure Batch job watcher")


def cursor_store() -> CursorStore:
    """The store the watchers of this process use."""
    return VariableStore()


def cursor_key(kwargs: Mapping[str, Any]) -> str:
    """The Variable of a watcher's cursor: named after its arguments, which are what Airflow tells one trigger from
    another by (one trigger serves every asset whose watcher has the same ones): a restarted or moved watcher finds
    its cursor, and two watchers that differ in any argument, both running, never share one."""
    digest = hashlib.sha256(json.dumps(dict(kwargs), sort_keys=True).encode()).hexdigest()[:16]
    return f"{CURSOR_VARIABLE_PREFIX}{digest}"


class _Changes:
    """The watcher's place in the account view: every change each look lists, queued for the watcher's loop."""

    select: Collection[str] = LISTED_FIELDS

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._queue: list[JobChange] = []
        self._arrived = asyncio.Event()

    def changes(self, changes: Sequence[JobChange]) -> None:
        self._queue.extend(changes)
        self._arrived.set()

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._arrived.wait(), timeout)
        self._arrived.clear()

    def take(self) -> list[JobChange]:
        taken, self._queue = self._queue, []
        return taken


def _decoded(metadata: Any) -> Any:
    """``metadata`` as given, or as Airflow 3.2's triggerer passes a serialized dict back to the trigger: still in
    its serialized form, ``{"__var": {...}, "__type": "dict"}``, whose keys (Airflow's ``Encoding`` members) may
    even have become their names (``"Encoding.VAR"``)."""
    if not isinstance(metadata, Mapping):
        return metadata
    names = {"__var": "__var", "Encoding.VAR": "__var", "__type": "__type", "Encoding.TYPE": "__type"}
    plain = {names.get(str(getattr(key, "value", key)), key): value for key, value in metadata.items()}
    kind = str(getattr(plain.get("__type"), "value", plain.get("__type")))
    if set(plain) == {"__var", "__type"} and kind in ("dict", "DagAttributeTypes.DICT"):
        return plain["__var"]
    return metadata


class AzureBatchJobCompletedTrigger(BaseEventTrigger):
    """Fires when a Batch job completes in the connection's account, for an ``AssetWatcher``.

    :param conn_id: the ``azbatch`` connection of the account.
    :param job_id_prefix: only jobs whose id starts with it (``"torchx-"``: TorchX's jobs).
    :param metadata: only jobs whose metadata holds each of these names with this value.
    :param pool_id: only jobs that ran on this pool.
    :param outcome: ``"succeeded"`` (every task succeeded), ``"failed"``, or None (``"any"``) for both.
    :param poll_interval: how often the account view looks, in seconds (it looks at the shortest interval any of
        its triggers asks for).
    """

    def __init__(
        self,
        conn_id: str = "azbatch_default",
        job_id_prefix: str | None = None,
        metadata: Mapping[str, str] | None = None,
        pool_id: str | None = None,
        outcome: str | None = None,
        poll_interval: float = 10.0,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow leaves BaseTrigger.__init__ unannotated
        metadata = _decoded(metadata)
        self.filter = JobFilter.of(job_id_prefix=job_id_prefix, metadata=metadata, pool_id=pool_id, outcome=outcome)
        if not isinstance(conn_id, str) or not conn_id:
            raise ValueError(f"conn_id={conn_id!r}: give the id of an azbatch connection")
        if not isinstance(poll_interval, (int, float)) or poll_interval <= 0:
            raise ValueError(f"poll_interval={poll_interval!r}: give a number of seconds above 0 (e.g. 10)")
        self.conn_id = conn_id
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "conn_id": self.conn_id,
                "job_id_prefix": self.filter.job_id_prefix,
                "metadata": dict(self.filter.metadata),
                "pool_id": self.filter.pool_id,
                "outcome": self.filter.outcome,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        store = cursor_store()
        key = cursor_key(self.serialize()[1])
        saved = await self._load_cursor(store, key)
        completions = Completions(saved)
        changes = _Changes(self.poll_interval)
        listening = account_view.account_view(self.conn_id).listen(
            changes, since=saved.watermark if saved is not None else None
        )
        self.log.info(
            "Watching Batch jobs of connection %r that complete%s (%s)",
            self.conn_id,
            f" after {saved.watermark.isoformat()}" if saved is not None else " from now on",
            self._describe_filter(),
        )
        waiting: dict[str, JobChange] = {}  # matched by the listing; their tasks decide
        hook = AzureBatchAsyncHook(self.conn_id)
        try:
            async with hook.connected():
                account = (await hook.get_settings()).account_name
                while True:
                    await changes.wait(self.poll_interval)
                    if not completions.started and listening.since is not None:
                        completions.start(listening.since)
                    for change in changes.take():
                        at = service_time(change.at)
                        completions.seen(at)
                        if (
                            change.state == "completed"
                            and completions.is_new(change.id, at)
                            and self.filter.matches_listing(change)
                        ):
                            completions.pending(change.id, at)
                            waiting[change.id] = change
                    for job_id, payload in await self._decide(hook, waiting, completions, account):
                        self.log.info(
                            "Batch job %s completed at %s (%s): firing",
                            job_id,
                            payload["completed_at"],
                            payload["outcome"],
                        )
                        completions.fired(job_id, time.monotonic())
                        yield TriggerEvent(payload)
                    await self._save_cursor(store, key, completions)
        finally:
            await listening.close()

    async def _decide(
        self,
        hook: AzureBatchAsyncHook,
        waiting: dict[str, JobChange],
        completions: Completions,
        account: str | None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """The events of the waiting jobs whose tasks pass the outcome filter; the tasks of each job are listed
        once (a job whose listing failed waits for the next poll)."""
        events: list[tuple[str, dict[str, Any]]] = []
        for job_id, change in list(waiting.items()):
            try:
                tasks = await hook.list_task_ends(job_id)
            except Exception as exc:  # the next poll tries again; the cursor's watermark waits for it
                self.log.warning("Could not list the tasks of Batch job %s: %s", job_id, describe_error(exc))
                continue
            del waiting[job_id]
            if tasks is None:
                self.log.warning("Batch job %s completed and was deleted before its tasks were listed", job_id)
                completions.decided(job_id)
            elif self.filter.matches_outcome(outcome_of(tasks)):
                events.append((job_id, job_event(change, tasks, conn_id=self.conn_id, account=account)))
            else:
                completions.decided(job_id)
        return events

    async def _load_cursor(self, store: CursorStore, key: str) -> Cursor | None:
        while True:
            try:
                text = await store.load(key)
            except Exception as exc:  # firing without it could repeat jobs already fired: wait for it
                self.log.warning(
                    "Could not read the cursor of this watcher (Variable %s): %s; trying again in %.0f s",
                    key,
                    exc,
                    CURSOR_RETRY_SECONDS,
                )
                await asyncio.sleep(CURSOR_RETRY_SECONDS)
                continue
            if text is None:
                return None
            try:
                return Cursor.from_json(text)
            except (ValueError, KeyError, TypeError) as exc:
                self.log.warning("The cursor in Variable %s is not one a watcher wrote (%s): starting afresh", key, exc)
                return None

    async def _save_cursor(self, store: CursorStore, key: str, completions: Completions) -> None:
        cursor = completions.to_save(time.monotonic())
        if cursor is None:
            return
        try:
            await store.save(key, cursor.to_json())
        except Exception as exc:  # the next poll saves it; until then a restart may fire recent jobs again
            self.log.warning("Could not save the cursor of this watcher (Variable %s): %s", key, exc)
            return
        completions.saved(cursor)

    def _describe_filter(self) -> str:
        parts = [
            f"id starts with {self.filter.job_id_prefix!r}" if self.filter.job_id_prefix else None,
            f"metadata {dict(self.filter.metadata)}" if self.filter.metadata else None,
            f"pool {self.filter.pool_id!r}" if self.filter.pool_id else None,
            f"outcome {self.filter.outcome}" if self.filter.outcome else None,
        ]
        return ", ".join(part for part in parts if part) or "every job"

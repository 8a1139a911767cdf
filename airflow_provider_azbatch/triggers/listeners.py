"""Listeners of an account view: subscribers told of every change its looks list, whatever job it is.

A :class:`ChangeListener` (an event trigger that fires when any job of the account completes, say) is told of
every change each look lists, each transition once; it may ask for more fields of each job (``select``:
``metadata``, ``executionInfo``, ...: they come with the listing, one ``$select`` for all) and to reach back in
time when it joins (``since``: the look that reaches back tells it every change since then, also those the view
told other listeners before; a restarted job watcher catches up so). It adds no request.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol

from airflow_provider_azbatch.model.records import JobChange, service_time

if TYPE_CHECKING:
    from airflow_provider_azbatch.triggers.account_view import AccountView

log = logging.getLogger(__name__)


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


class Listeners:
    """The listeners of one view, and the transitions it told them (each once)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self.all: list[Listening] = []
        self._listed: dict[str, tuple[str, datetime]] = {}  # job id -> its last transition told to listeners

    def select(self) -> list[str]:
        """The fields the look asks for besides id, state and stateTransitionTime: what listeners need."""
        return sorted({name for listening in self.all for name in listening.listener.select})

    def start_from(self, since: datetime | None) -> None:
        """Before a look: a listener that joined since the last one hears of what changed since that one."""
        for listening in self.all:
            if listening.since is None:
                listening.since = since or datetime.now(timezone.utc)

    def tell(self, changes: list[JobChange], reach: datetime | None = None) -> None:
        """Tell each listener of the changes listed (``reach``: how far back the look listed)."""
        new: list[tuple[JobChange, datetime]] = []
        listed: list[tuple[JobChange, datetime]] = []
        for change in changes:
            at = service_time(change.at)
            listed.append((change, at))
            last = self._listed.get(change.id)
            if last is not None and (last[0] == change.at or last[1] > at):
                continue  # listed again by an overlapping look, or older than what was told
            self._listed[change.id] = (change.at, at)
            new.append((change, at))
        for listening in list(self.all):
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

    def forget_before(self, since: datetime) -> None:
        """What was listed before ``since`` cannot be listed again by the next looks: no need to remember it."""
        for job_id in [job_id for job_id, (_, at) in self._listed.items() if at < since]:
            del self._listed[job_id]

"""How often the job trigger looks at its job itself, between the account view's listings (:mod:`.account_view`),
and where its node samples come from (the view's pool pulse, :mod:`.pool_pulse`)."""

from __future__ import annotations

import time
from typing import Any

from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.model.records import NodeTimes
from airflow_provider_azbatch.triggers import account_view
from airflow_provider_azbatch.triggers.pool_pulse import PoolPulse
from airflow_provider_azbatch.watching.core import JobWatcher


def ended_as_listed(subscription: account_view.Subscription | account_view.OwnLooks, watcher: JobWatcher) -> bool:
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

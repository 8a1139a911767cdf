"""The pool pulse: one listing of a pool's nodes now and then, instead of a look at every quiet job on the pool.

A deferred job at which nothing moved at its last look (its tasks run; no task waits for nodes, no streamed output
is followed) shows nothing to the account view's listing until it ends, and its progress (a task that finished)
only in its own task counts: a request per job. Yet when a task starts or ends, the node that runs it changes:
its running tasks, the tasks it ran (``totalTasksRun``), the tasks that recently ran on it (``recentTasks``, each
with its job). So once ``PULSE_MIN_JOBS`` quiet jobs of a triggerer wait on one pool, their account view lists
the pool's nodes every ``PULSE_SECONDS`` (or its own interval, if longer), and compares each listing with the one
before: a job named by a node that changed is told to look at itself (every quiet job of the pool, when a node
that changed names none); the others need not look. A quiet job the pulse covers still looks at itself now and
then (``QUIET_LOOK_SECONDS``, or further apart for many jobs: ``QUIET_LOOKS_PER_SECOND`` a second for the account
at most), for what no node shows (a task terminated before it started, a job's tasks that fell out of a busy
node's short ``recentTasks``).

A pulse that fails for ``MAX_JOB_LOOK_SECONDS`` (or a view whose listing fails) no longer covers its jobs: they
are told to look, paced, and go back to their own cadence. The pulse's listing also serves the jobs' node samples
(what their pool's idle nodes cost, :mod:`~airflow_provider_azbatch.watching.idle_time`), so that a thousand
jobs on one pool do not list its nodes a thousand times a minute.

Fewer quiet jobs on a pool look at themselves (at most a minute apart): cheaper than a listing every
``PULSE_SECONDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from airflow_provider_azbatch.model.records import NodeTimes

# How often a pool with quiet jobs has its nodes listed (at least the account view's interval).
PULSE_SECONDS = 10.0
# The pulse runs for a pool once this many quiet jobs wait on it (fewer look at themselves a minute apart).
PULSE_MIN_JOBS = 7
# A quiet job the pulse covers still looks at itself this often, at least...
QUIET_LOOK_SECONDS = 600.0
# ... and the jobs of an account it covers make at most this many such looks a second together.
QUIET_LOOKS_PER_SECOND = 0.1
# A pulse that has not answered for this long no longer covers its jobs.
PULSE_STALE_SECONDS = 60.0


class Quiet(Protocol):
    """A deferred trigger's subscription, as the pulse sees it."""

    quiet_pool: str | None
    job_id: str

    def look_soon(self) -> None: ...


def jobs_moved(before: Iterable[NodeTimes], after: Iterable[NodeTimes] | None) -> set[str] | None:
    """The jobs whose tasks may have started or ended on a pool between two listings of its nodes (``after``
    None: the pool is gone). None: which jobs cannot be told (a node whose tasks changed names no job, or the pool
    went): any job of the pool's."""
    if after is None:
        return None
    earlier = {node.id: node for node in before}
    moved: set[str] = set()
    for node in after:
        previous = earlier.pop(node.id, None)
        if previous is None:  # a new node: what it runs already (nothing, mostly) started since
            if node.running_tasks or node.tasks_run:
                if not node.recent_jobs:
                    return None
                moved.update(node.recent_jobs)
            continue
        tasks_changed = (previous.running_tasks, previous.tasks_run) != (node.running_tasks, node.tasks_run)
        if not tasks_changed and previous.state == node.state:
            continue
        named = {*previous.recent_jobs, *node.recent_jobs}
        if tasks_changed and not named:
            return None
        moved.update(named)
    for gone in earlier.values():  # its running tasks go back to their jobs' queues
        if gone.running_tasks:
            if not gone.recent_jobs:
                return None
            moved.update(gone.recent_jobs)
    return moved


class PoolPulse:
    """The pulses of one account view's pools (see the module docstring); the view lists the pools ``due``."""

    def __init__(self) -> None:
        # pool -> its quiet jobs' subscriptions, in order, each with whether it counts on the pulse
        self._quiet: dict[str, dict[Quiet, bool]] = {}
        self._listed: dict[str, tuple[float, list[NodeTimes]]] = {}  # pool -> its last listing: when, the nodes
        self._period: dict[str, float] = {}  # pool -> how often it is listed
        self._next_at: dict[str, float] = {}
        self._failing_since: dict[str, float] = {}
        self._covered = 0  # how many of those subscriptions count on the pulse

    def quiet(self, subscription: Quiet, pool_id: str) -> bool:
        """The subscription's job is quiet on ``pool_id``: whether the pulse covers it (it runs for the pool)."""
        if subscription.quiet_pool != pool_id:
            self.unquiet(subscription)
            subscription.quiet_pool = pool_id
        covered = pool_id in self._listed
        subs = self._quiet.setdefault(pool_id, {})
        self._covered += covered - subs.get(subscription, False)
        subs[subscription] = covered
        return covered

    def unquiet(self, subscription: Quiet) -> None:
        pool_id, subscription.quiet_pool = subscription.quiet_pool, None
        subs = self._quiet.get(pool_id) if pool_id is not None else None
        if subs is None:
            return
        self._covered -= subs.pop(subscription, False)
        if not subs:
            del self._quiet[pool_id]  # type: ignore[arg-type]
            self._forget(pool_id)  # type: ignore[arg-type]

    def covered(self) -> int:
        """How many quiet jobs count on the pulse (they look at themselves only when it tells them to, or rarely)."""
        return self._covered

    def quiet_look_interval(self) -> float:
        """How long a covered job goes without looking at itself (see ``QUIET_LOOKS_PER_SECOND``)."""
        return max(QUIET_LOOK_SECONDS, self.covered() / QUIET_LOOKS_PER_SECOND)

    def due(self, now: float) -> list[str]:
        """The pools whose nodes the view lists now."""
        return [
            pool_id
            for pool_id, subs in self._quiet.items()
            if (pool_id in self._listed or len(subs) >= PULSE_MIN_JOBS) and now >= self._next_at.get(pool_id, 0.0)
        ]

    def observe(self, pool_id: str, nodes: list[NodeTimes] | None, now: float, every: float) -> None:
        """A listing of the pool's nodes (None: the pool is gone): tell the jobs it names to look."""
        self._failing_since.pop(pool_id, None)
        subs = self._quiet.get(pool_id)
        if subs is None:
            return
        self._period[pool_id] = period = max(PULSE_SECONDS, every)
        self._next_at[pool_id] = now + period
        listed = self._listed.get(pool_id)
        if nodes is None:
            self._release(pool_id)
            return
        self._listed[pool_id] = (now, nodes)
        if listed is None:
            return  # the first: what the jobs saw at their last look is no older than it
        moved = jobs_moved(listed[1], nodes)
        self._tell(subs, lambda job_id: moved is None or job_id in moved)

    def failed(self, pool_id: str, now: float, every: float) -> None:
        """Its listing failed: tried again at the next pulse; once it failed for ``PULSE_STALE_SECONDS``, its jobs
        are told to look and go back to their own cadence."""
        self._next_at[pool_id] = now + max(PULSE_SECONDS, every)
        since = self._failing_since.setdefault(pool_id, now)
        if now - since >= PULSE_STALE_SECONDS and pool_id in self._listed:
            self._release(pool_id)

    def release_all(self) -> None:
        """The view cannot list the account's jobs: every covered job looks at itself again."""
        for pool_id in list(self._listed):
            self._release(pool_id)

    def nodes(self, pool_id: str, now: float) -> list[NodeTimes] | None:
        """The pool's nodes as its pulse last listed them, if no longer ago than its period (None: not so listed)."""
        listed = self._listed.get(pool_id)
        if listed is None or now - listed[0] > self._period.get(pool_id, PULSE_SECONDS):
            return None
        return listed[1]

    def _release(self, pool_id: str) -> None:
        self._forget(pool_id)
        subs = self._quiet.pop(pool_id, {})
        self._covered -= sum(subs.values())
        for subscription in subs:
            subscription.quiet_pool = None
        self._tell(subs, lambda _: True)

    def _forget(self, pool_id: str) -> None:
        self._listed.pop(pool_id, None)
        self._period.pop(pool_id, None)
        self._next_at.pop(pool_id, None)
        self._failing_since.pop(pool_id, None)

    @staticmethod
    def _tell(subs: Iterable[Quiet], which: Callable[[str], bool]) -> None:
        for subscription in list(subs):
            if which(subscription.job_id):
                subscription.look_soon()

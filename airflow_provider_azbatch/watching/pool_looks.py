"""What a job's watch reads of its pool: the pool's health while tasks wait, the job preparation task's runs, the
pool's nodes for what they cost. No I/O (steps of :class:`~.calls.Call` batches, as :mod:`.core`).

Every read here but the preparation task's status only informs (:data:`~.calls.INFORMING`): one that is refused
(403) or finds the pool gone (404) leaves a gap the task's log names once (:mod:`.gaps`), and is not asked again
for ``NODE_SAMPLE_SECONDS``; the watch goes on without it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.records import TERMINAL_JOB_STATES, NodeTimes, SideTaskRun
from airflow_provider_azbatch.watching import idle_time
from airflow_provider_azbatch.watching.blocking import blocked_state, preparation_blocks_all
from airflow_provider_azbatch.watching.calls import Gap, Step, ask
from airflow_provider_azbatch.watching.gaps import gap_line
from airflow_provider_azbatch.watching.pool_health import PoolProblem, check_pool
from airflow_provider_azbatch.watching.preemption import SpotFallbackDue, fallback_available
from airflow_provider_azbatch.watching.state import WatchState

# A pool made for the job: its nodes are listed when the counts move and at least this often (its node
# time is what the job cost, and the pool goes with the job); a pool whose nodes could not be read, no sooner.
NODE_SAMPLE_SECONDS = 60.0
# Failed job preparation runs kept in the state (where they failed, their exit code, where their output is).
NAMED_PREPARATION_FAILURES = 3


class PoolLooks:
    """The pool's part of :class:`~.core.JobWatcher` (a base class of it)."""

    state: WatchState
    emit: Callable[[str | None, str], None]
    last_pool_check: float | None
    last_node_sample: float | None
    # When the pool's nodes last could not be read (a gap): not asked again for NODE_SAMPLE_SECONDS.
    nodes_unread_at: float | None = None

    def all_tasks_done(self) -> bool:
        raise NotImplementedError

    def waiting_for_nodes(self) -> bool:
        """Tasks wait and none runs (for nodes, or for a preparation task)."""
        counts = self.state.counts
        return counts is not None and counts["active"] > 0 and counts["running"] == 0

    def say_gap(self, gap: Gap) -> None:
        """What an informing read left missing, in the task's log once (a passing failure: nothing)."""
        said = gap_line(self.state.job_id, gap)
        if said is None:
            return
        key, line = said
        if key not in self.state.gaps:
            self.state.gaps[key] = line
            self.emit(None, line)

    # -- the pool's health, while tasks wait ---------------------------------------------------------
    def _pool_check_due(self, now: float) -> bool:
        """Tasks wait and none runs: is the pool still able to give them nodes? (checked now and then)"""
        state = self.state
        return (
            self.waiting_for_nodes()
            and state.pool_id is not None
            and state.job_state not in TERMINAL_JOB_STATES
            and (self.last_pool_check is None or now - self.last_pool_check >= state.pool_check_interval)
        )

    def _check_pool(self, now: float) -> Step[None]:
        state = self.state
        assert state.pool_id is not None
        self.last_pool_check = now
        problem = yield from check_pool(state.pool_id)
        if isinstance(problem, Gap):
            self.say_gap(problem)
            return
        self._observe_pool(problem)
        if state.waits_for_preparation:
            yield from self._check_preparation(state.pool_id)

    def _observe_pool(self, problem: PoolProblem | None) -> None:
        """Raise the problem if it is certain, or seen at two looks in a row."""
        if problem is None:
            self.state.pool_suspect = False
            return
        if problem.allocation and fallback_available(self.state):
            raise SpotFallbackDue(f"the pool cannot get its Spot nodes: {problem}")
        if problem.certain or self.state.pool_suspect:
            raise problem
        self.state.pool_suspect = True

    def _check_preparation(self, pool_id: str) -> Step[None]:
        """Tasks wait and none runs: did the job preparation task fail on every node of the pool?"""
        state = self.state
        runs, pool = yield from ask(read.list_preparation_status(state.job_id), read.get_pool_snapshot(pool_id))
        if isinstance(pool, Gap):
            self.say_gap(pool)
            return
        current = (pool.current_dedicated_nodes or 0) + (pool.current_low_priority_nodes or 0) if pool else 0
        failed: list[SideTaskRun] = preparation_blocks_all(runs, current)
        if not failed:
            return
        (active,) = yield from ask(read.list_active_dependencies(state.job_id))
        ids = [task.id for task in active]
        state.blocked = blocked_state(
            "preparation", ids, len(ids), nodes=[run.to_json() for run in failed[:NAMED_PREPARATION_FAILURES]]
        ).to_json()
        self.emit(
            None,
            f"Batch job {state.job_id}: nothing more can run: its job preparation task failed on every node of "
            f"pool {pool_id} ({len(failed)})",
        )

    # -- the pool's nodes, for what they cost ---------------------------------------------------------
    def _node_sample_due(self, now: float, moved: bool) -> bool:
        """A pool made for the job: when the counts move and every minute (its node time is what the job cost);
        any pool: as its idle time is sampled (see :mod:`.idle_time`); a pool whose nodes could not be read: a
        minute later at the soonest."""
        state = self.state
        if state.pool_id is None or state.job_state in TERMINAL_JOB_STATES:
            return False
        if self.nodes_unread_at is not None and now - self.nodes_unread_at < NODE_SAMPLE_SECONDS:
            return False
        if state.auto_pool_vm_size is not None and (
            moved or self.last_node_sample is None or now - self.last_node_sample >= NODE_SAMPLE_SECONDS
        ):
            return True
        return idle_time.sample_due(state, state.pool_id, now, moved)

    def _sample_nodes(self, now: float) -> Step[None]:
        state = self.state
        assert state.pool_id is not None
        self.last_node_sample = now
        (nodes,) = yield from ask(read.list_pool_nodes(state.pool_id))
        if isinstance(nodes, Gap):
            self.nodes_unread_at = now
            self.say_gap(nodes)
            return
        if nodes is None:  # the pool is gone: so are its nodes (counted up to now), and nothing to ask again soon
            self.nodes_unread_at = now
            if not self.all_tasks_done():
                self.say_gap(Gap(read.list_pool_nodes(state.pool_id), None))
        self.observe_nodes(nodes, now)
        idle_time.sample(state, state.pool_id, nodes, now)

    def observe_nodes(self, nodes: list[NodeTimes] | None, now: float) -> None:
        """Record the nodes of a pool made for the job: new ones with their allocation time; those no longer listed
        have left."""
        if self.state.auto_pool_vm_size is None:
            return
        seen = datetime.fromtimestamp(now, timezone.utc).isoformat()
        listed = {node.id for node in nodes or []}
        for node in nodes or []:
            record = self.state.nodes.setdefault(
                node.id, {"dedicated": node.dedicated, "allocated": node.allocated or seen, "gone": False}
            )
            record["seen"] = seen
        for node_id, record in self.state.nodes.items():
            if node_id not in listed:
                record["gone"] = True

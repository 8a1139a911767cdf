"""Moving a job off Spot nodes, the way Batch allows (the watch says when: :mod:`..watching.preemption`).

- **A shared pool**: the job moves to a pool of dedicated nodes beside it (``SpotFallback.dedicated_pool_id``,
  by default ``<pool id>-dedicated``): made like the Spot pool, created if missing (and checked like any shared
  pool otherwise), autoscaled from zero so that it gives its nodes back. A job can change pools only while it
  is disabled, so it is disabled (its tasks still running on Spot nodes are requeued: they start over on the
  dedicated nodes), given the pool, and enabled again. The Spot pool is left as it is for the other jobs using
  it (its formula gives its nodes back once nothing of theirs is pending); turning the shared pool itself to
  dedicated nodes would move every job on it, and nobody would turn it back.
- **A job's own pool** (``BatchPool.auto``): Batch cannot give a job another auto pool, but this one is the
  job's alone, so it is turned to dedicated nodes: a fixed pool stops seeking Spot nodes and asks for
  ``max_nodes`` dedicated ones and no Spot ones (Spot nodes still running a task finish it first); an
  autoscaled one gets the dedicated version of its formula.

Done on the worker (the deferred watch ends with a ``fallback`` event, the task falls back and defers again), so
that the dedicated pool is made with the same connections and secrets as the first one.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from airflow_provider_azbatch.compute.autoscale import autoscale_formula
from airflow_provider_azbatch.runs.pre_submit import prepare_request_pool
from airflow_provider_azbatch.submission.request import JobRequest
from airflow_provider_azbatch.submission.task_extras import registry_credentials
from airflow_provider_azbatch.watching import idle_time
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


def fall_back(hook: AzureBatchHook, request: JobRequest, state: WatchState, reason: str, log: Log) -> None:
    """Move the watched job to dedicated nodes; the state then watches it there."""
    spot = state.spot
    assert spot is not None
    assert spot.get("fallback")
    assert not spot.get("fell_back")
    strategy = request.pool
    job_id, spot_pool = state.job_id, state.pool_id
    log.warning("Batch job %s falls back to dedicated nodes: %s", job_id, reason)
    if strategy.kind == "shared" and state.pool_id == strategy.dedicated_twin().pool_id:
        pool_id = state.pool_id  # moved already (a fallback repeated from an older state): nothing to do
    elif strategy.kind == "shared":
        checked = request.check(rendered=True)
        twin = strategy.dedicated_twin()
        pool_id, _ = prepare_request_pool(
            hook, request, checked, registry_credentials(hook, request.containers), log, twin
        )
        assert pool_id is not None
        hook.move_job_to_pool(job_id, pool_id)
        assert spot_pool is not None
        # The watch samples only the job's pool: the Spot pool's last sample, while the job still used it.
        idle_time.sample(state, spot_pool, hook.list_pool_nodes(spot_pool), time.time(), left=True)
        log.warning(
            "Batch job %s moved from Spot pool %s to dedicated pool %s (autoscaled: it gives its nodes back once the "
            "job is done); its tasks that were running on Spot nodes start over there",
            job_id,
            spot_pool,
            pool_id,
        )
    else:
        assert spot_pool is not None
        assert strategy.requirements is not None
        pool_id = spot_pool
        if strategy.autoscale:
            pool = hook.get_pool(pool_id, select=["id", "taskSlotsPerNode"])
            assert pool is not None  # the Spot pool the job ran in
            slots = pool.task_slots_per_node or 1
            multi_node = max([1, *spot.get("task_nodes", {}).values()])
            formula = autoscale_formula(
                strategy.max_nodes, min_nodes=strategy.min_nodes, task_slots_per_node=slots, multi_node=multi_node
            )
            hook.retarget_pool(pool_id, formula=formula)
            what = f"scales dedicated nodes (0 to {strategy.max_nodes}) instead of Spot ones"
        else:
            hook.retarget_pool(pool_id, dedicated_nodes=strategy.max_nodes)
            what = f"asks for {strategy.max_nodes} dedicated nodes and no Spot nodes"
        log.warning(
            "The job's own pool %s now %s; its tasks still running on Spot nodes finish there unless preempted",
            pool_id,
            what,
        )
    spot["fell_back"] = {
        "at": datetime.now(timezone.utc).isoformat(),
        "reason": reason,
        "from_pool": spot_pool,
        "to_pool": pool_id,
    }
    # Requeued by the move itself (a shared pool's job), not by Batch: not counted as requeues.
    spot["attempts"] = {}
    spot["waiting_since"] = None
    state.pool_id = pool_id
    state.pool_suspect = False

"""Telling a job that waits for nodes from a job that will never get any. No I/O.

While a job's tasks wait (active, none running), its pool is looked at every ``pool_check_interval``:
allocation errors (``resizeErrors``: quota, VM size not available...) with no node to run on, an
autoscale formula that fails, or every node stuck after a failed start task, end the wait with the
service's own cause instead of waiting forever.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.reads import Call
from airflow_provider_azbatch.watching.calls import Gap, Step, ask

STUCK_NODE_STATES = ("starttaskfailed", "unusable")
START_TASK_STDERR = "startup/stderr.txt"
STDERR_TAIL_BYTES = 8 * 1024


class PoolProblem(Exception):
    """The job's pool cannot run it; the message says why, in the service's words.

    ``certain`` is False for what one look cannot prove (idle nodes while tasks wait may be a passing
    moment): the watcher fails the job only when the next look sees the same. ``nodes``: the nodes at fault
    (a failed start task, unusable), whose Batch service logs are worth keeping
    (:mod:`airflow_provider_azbatch.runs.forensics`). ``allocation``: the pool could not get the nodes it asked
    for (a pool of Spot nodes with a ``spot_fallback`` falls back to dedicated ones).
    """

    def __init__(
        self,
        message: str,
        *,
        certain: bool = True,
        pool_id: str | None = None,
        nodes: tuple[str, ...] = (),
        allocation: bool = False,
    ) -> None:
        super().__init__(message)
        self.certain = certain
        self.pool_id = pool_id
        self.nodes = nodes
        self.allocation = allocation


def _errors(pool: Any) -> str:
    return "; ".join(f"{e.code}: {e.message}" for e in (pool.resize_errors or []))


def diagnose(pool: Any, stuck_nodes: list[Any], stderr_tail: list[str], idle_nodes: int = 0) -> PoolProblem | None:
    """A failure message, or None while the pool may still get usable nodes.

    ``idle_nodes``: nodes doing nothing while the job's tasks wait (a multi-node task that needs more
    nodes than the pool could allocate leaves them so).
    """
    current = (pool.current_dedicated_nodes or 0) + (pool.current_low_priority_nodes or 0)
    allocation_failed = bool(pool.resize_errors) and enum_value(pool.allocation_state) == "steady"
    if allocation_failed and current - len(stuck_nodes) <= 0:
        return PoolProblem(f"Pool {pool.id} could not allocate nodes for the job: {_errors(pool)}", allocation=True)
    if allocation_failed and current and idle_nodes >= current - len(stuck_nodes):
        return PoolProblem(
            f"Pool {pool.id} got {current} of the nodes it asked for, too few for the waiting tasks "
            f"(its {idle_nodes} usable nodes stay idle): {_errors(pool)}",
            certain=False,
            allocation=True,
        )
    run = pool.auto_scale_run
    if pool.enable_auto_scale and run is not None and run.error is not None and current == 0:
        details = "; ".join(f"{v.name}={v.value}" for v in (run.error.error_values or []))
        return PoolProblem(
            f"Pool {pool.id} cannot scale up: its autoscale formula failed ({run.error.code}: {run.error.message}"
            + (f"; {details}" if details else "")
            + ")"
        )
    if current and len(stuck_nodes) >= current:
        node = stuck_nodes[0]
        info = node.start_task_info
        failure = getattr(info, "failure_info", None)
        reason = f"node {node.id} is {enum_value(node.state)}"
        if info is not None and getattr(info, "exit_code", None) is not None:
            reason += f"; its start task exited with code {info.exit_code}"
        if failure is not None:
            reason += f" ({failure.code}: {failure.message})"
        for error in getattr(node, "errors", None) or []:
            # A node made unusable by the service says why there (a mount that failed, a disk that is full).
            details = ", ".join(f"{item.name}={item.value}" for item in error.error_details or [])
            reason += f"; {error.code}: {error.message}" + (f" ({details})" if details else "")
        message = f"Pool {pool.id} has no usable node: {reason}"
        if stderr_tail:
            message += ". Last lines of the start task's stderr:\n" + "\n".join(f"    {line}" for line in stderr_tail)
        return PoolProblem(message, pool_id=pool.id, nodes=tuple(node.id for node in stuck_nodes))
    return None


def check_pool(pool_id: str) -> Step[PoolProblem | Gap | None]:
    """Look at the pool (and its stuck nodes); the problem that keeps the job from running, if any (a
    :class:`~.calls.Gap`: the pool could not be read, so no problem can be told)."""
    pool, stuck = yield from ask(read.get_pool_snapshot(pool_id), read.list_nodes_in_states(pool_id, STUCK_NODE_STATES))
    for answer in (pool, stuck):
        if isinstance(answer, Gap):
            return answer
    if pool is None:
        return PoolProblem(f"Pool {pool_id} does not exist (it was deleted, or never created)")
    calls: list[Call[Any]] = []
    if stuck:
        calls.append(read.read_node_file_tail(pool_id, stuck[0].id, START_TASK_STDERR, STDERR_TAIL_BYTES))
    if pool.resize_errors:
        calls.append(read.list_nodes_in_states(pool_id, ("idle",)))
    results = (yield from ask(*calls)) if calls else []
    tail: list[str] = []
    if stuck and results[0] is not None and not isinstance(results[0], Gap):
        tail = results[0].last_lines(10)  # (a node's log that could not be read: the problem without it)
    idle = 0
    if pool.resize_errors:
        if isinstance(results[-1], Gap):
            return results[-1]
        idle = len(results[-1])
    return diagnose(pool, stuck, tail, idle)

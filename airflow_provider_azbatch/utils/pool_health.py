"""Telling a job that waits for nodes from a job that will never get any.

While a job's tasks wait (active, none running), its pool is looked at every ``pool_check_interval``:
allocation errors (``resizeErrors``: quota, VM size not available...) with no node to run on, an
autoscale formula that fails, or every node stuck after a failed start task, end the wait with the
service's own cause instead of waiting forever.
"""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch.utils.log_tail import split_lines

_POOL_SELECT = [
    "id",
    "state",
    "allocationState",
    "resizeErrors",
    "currentDedicatedNodes",
    "currentLowPriorityNodes",
    "targetDedicatedNodes",
    "targetLowPriorityNodes",
    "enableAutoScale",
    "autoScaleRun",
]
_STUCK_FILTER = "state eq 'starttaskfailed' or state eq 'unusable'"
_IDLE_FILTER = "state eq 'idle'"
_STDERR_TAIL_BYTES = 8 * 1024


class PoolProblem(Exception):
    """The job's pool cannot run it; the message says why, in the service's words.

    ``certain`` is False for what one look cannot prove (idle nodes while tasks wait may be a passing
    moment): the watcher fails the job only when the next look sees the same.
    """

    def __init__(self, message: str, *, certain: bool = True) -> None:
        super().__init__(message)
        self.certain = certain


def _value(value: Any) -> str:
    return str(getattr(value, "value", value))


def _errors(pool: Any) -> str:
    return "; ".join(f"{e.code}: {e.message}" for e in (pool.resize_errors or []))


def diagnose(pool: Any, stuck_nodes: list[Any], stderr_tail: list[str], idle_nodes: int = 0) -> PoolProblem | None:
    """A failure message, or None while the pool may still get usable nodes.

    ``idle_nodes``: nodes doing nothing while the job's tasks wait (a multi-node task that needs more
    nodes than the pool could allocate leaves them so).
    """
    current = (pool.current_dedicated_nodes or 0) + (pool.current_low_priority_nodes or 0)
    allocation_failed = bool(pool.resize_errors) and _value(pool.allocation_state) == "steady"
    if allocation_failed and current - len(stuck_nodes) <= 0:
        return PoolProblem(f"Pool {pool.id} could not allocate nodes for the job: {_errors(pool)}")
    if allocation_failed and current and idle_nodes >= current - len(stuck_nodes):
        return PoolProblem(
            f"Pool {pool.id} got {current} of the nodes it asked for, too few for the waiting tasks "
            f"(its {idle_nodes} usable nodes stay idle): {_errors(pool)}",
            certain=False,
        )
    run = pool.auto_scale_run
    if pool.enable_auto_scale and run is not None and run.error is not None and current == 0:
        details = "; ".join(f"{v.name}={v.value}" for v in (run.error.values or []))
        return PoolProblem(
            f"Pool {pool.id} cannot scale up: its autoscale formula failed ({run.error.code}: {run.error.message}"
            + (f"; {details}" if details else "")
            + ")"
        )
    if current and len(stuck_nodes) >= current:
        node = stuck_nodes[0]
        info = node.start_task_info
        failure = getattr(info, "failure_info", None)
        reason = f"node {node.id} is {_value(node.state)}"
        if info is not None and getattr(info, "exit_code", None) is not None:
            reason += f"; its start task exited with code {info.exit_code}"
        if failure is not None:
            reason += f" ({failure.code}: {failure.message})"
        message = f"Pool {pool.id} has no usable node: {reason}"
        if stderr_tail:
            message += ". Last lines of the start task's stderr:\n" + "\n".join(f"    {line}" for line in stderr_tail)
        return PoolProblem(message)
    return None


def _tail(data: bytes) -> list[str]:
    lines, _ = split_lines(data, final=True)
    return lines[-10:]


def check_pool(client: Any, pool_id: str) -> None:
    """Raise :class:`PoolProblem` if the pool cannot run the waiting job (sync client)."""
    try:
        pool = client.get_pool(pool_id, select=_POOL_SELECT)
    except ResourceNotFoundError:
        raise PoolProblem(f"Pool {pool_id} does not exist (it was deleted, or never created)") from None
    stuck = list(client.list_nodes(pool_id, filter=_STUCK_FILTER, select=["id", "state", "startTaskInfo"]))
    tail: list[str] = []
    if stuck:
        try:
            size = client.get_node_file_properties(pool_id, stuck[0].id, "startup/stderr.txt").content_length or 0
            if size:
                start = max(0, size - _STDERR_TAIL_BYTES)
                data = b"".join(
                    client.download_node_file(
                        pool_id, stuck[0].id, "startup/stderr.txt", ocp_range=f"bytes={start}-{size - 1}"
                    )
                )
                tail = _tail(data)
        except ResourceNotFoundError:
            pass
    idle = 0
    if pool.resize_errors:
        idle = sum(1 for _ in client.list_nodes(pool_id, filter=_IDLE_FILTER, select=["id"]))
    problem = diagnose(pool, stuck, tail, idle)
    if problem:
        raise problem


async def acheck_pool(client: Any, pool_id: str) -> None:
    """The same with the ``azure.batch.aio`` client."""
    try:
        pool = await client.get_pool(pool_id, select=_POOL_SELECT)
    except ResourceNotFoundError:
        raise PoolProblem(f"Pool {pool_id} does not exist (it was deleted, or never created)") from None
    stuck = [
        node async for node in client.list_nodes(pool_id, filter=_STUCK_FILTER, select=["id", "state", "startTaskInfo"])
    ]
    tail: list[str] = []
    if stuck:
        try:
            props = await client.get_node_file_properties(pool_id, stuck[0].id, "startup/stderr.txt")
            size = props.content_length or 0
            if size:
                start = max(0, size - _STDERR_TAIL_BYTES)
                stream = await client.download_node_file(
                    pool_id, stuck[0].id, "startup/stderr.txt", ocp_range=f"bytes={start}-{size - 1}"
                )
                tail = _tail(b"".join([chunk async for chunk in stream]))
        except ResourceNotFoundError:
            pass
    idle = 0
    if pool.resize_errors:
        idle = len([node async for node in client.list_nodes(pool_id, filter=_IDLE_FILTER, select=["id"])])
    problem = diagnose(pool, stuck, tail, idle)
    if problem:
        raise problem

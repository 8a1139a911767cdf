"""What the watch could not read of what only informs, said once in the task's log. No I/O.

A read that only informs (:data:`~.calls.INFORMING`: a pool's nodes for the idle time and cost the task reports,
the pool's health, a node's logs) may fail without failing the watch: the watch goes on without it, and the
task's log says once what is missing, why, and what would fix it. A passing failure (throttled, a server error, a
dropped connection) says nothing: the read is tried again at its next turn.
"""

from __future__ import annotations

from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch.hooks.errors import describe_error, is_transient
from airflow_provider_azbatch.watching.calls import Gap
from airflow_provider_azbatch.watching.state import WatchState

NODES = "the idle time of its nodes is not reported, and its Spot nodes are priced as dedicated ones"
HEALTH = "a pool that cannot give the job nodes is not told apart from a busy one"
# What each informing read serves, as the task's log names what is missing without it.
SERVES = {
    "list_pool_nodes": NODES,
    "get_pool_snapshot": HEALTH,
    "list_nodes_in_states": HEALTH,
    "read_node_file_tail": "a failed node's start task output is not shown",
}
FIX_REFUSED = (
    "give the connection's credential a role on the Batch account that reads its pools and their nodes (the "
    "built-in Azure Batch Data Contributor does)"
)


def gap_key(pool_id: str, cause: str, method: str) -> str:
    """How a gap is remembered (``WatchState.gaps``): one per pool, cause and what it leaves missing."""
    return f"{pool_id}:{cause}:{'nodes' if SERVES.get(method) == NODES else method}"


def gap_line(job_id: str, gap: Gap) -> tuple[str, str] | None:
    """``(key, line)``: what the task's log says of ``gap``, once per key; None for a passing failure."""
    error = gap.error
    if error is not None and is_transient(error):
        return None
    pool_id = str(gap.call.pool_id)
    serves = SERVES.get(gap.call.name, "what it would report is not")
    gone = error is None or isinstance(error, ResourceNotFoundError)
    status = 404 if gone else getattr(error, "status_code", None)
    if status == 404:
        cause = "404 PoolNotFound" if error is None else f"404 {describe_error(error)}"
        line = f"Batch job {job_id}: pool {pool_id} is gone ({cause}): {serves} from now on"
        return gap_key(pool_id, "gone", gap.call.name), line
    assert error is not None
    if status == 403:
        line = (
            f"Batch job {job_id}: the nodes of pool {pool_id} cannot be read with this connection's credential "
            f"(403 {describe_error(error)}): the job is watched as before, but {serves}. Fix: {FIX_REFUSED}"
        )
        return gap_key(pool_id, "refused", gap.call.name), line
    line = f"Batch job {job_id}: pool {pool_id} could not be read ({describe_error(error)}): {serves}"
    return gap_key(pool_id, "failed", gap.call.name), line


def nodes_unread(state: WatchState, pool_id: str) -> bool:
    """Whether the watch said it could not read the pool's nodes (refused, or the pool is gone): a report that
    would read them again goes without them."""
    return any(gap_key(pool_id, cause, "list_pool_nodes") in state.gaps for cause in ("refused", "gone"))

"""Which nodes of a pool a task may start on: free slots, the fill type, job preparation results."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .jobs import Job
    from .pools import ComputeNode, Pool
    from .tasks import Task


def pick_node(nodes: Iterable[ComputeNode], task: Task, spread: bool, job: Job) -> ComputeNode | None:
    fitting = _fitting(nodes, task, job)
    if not fitting:
        return None
    if spread:
        return max(fitting, key=lambda node: (node.free_slots(), -node.index))
    return min(fitting, key=lambda node: (node.free_slots(), node.index))


def hosts_multi_instance_tasks(pool: Pool) -> bool:
    """The documented requirement: inter-node communication and one task slot per node.

    On any other pool the service never schedules a multi-instance task; it stays active.
    """
    return bool(pool.spec.get("enableInterNodeCommunication")) and pool.task_slots == 1


def pick_instance_nodes(nodes: Iterable[ComputeNode], task: Task, job: Job) -> list[ComputeNode] | None:
    """Distinct nodes for every instance of a multi-instance task, the primary's first; None until there are."""
    fitting = sorted(_fitting(nodes, task, job), key=lambda node: node.index)
    wanted = task.number_of_instances
    return fitting[:wanted] if len(fitting) >= wanted else None


def _fitting(nodes: Iterable[ComputeNode], task: Task, job: Job) -> list[ComputeNode]:
    return [node for node in nodes if node.usable and node.free_slots() >= task.slots and _eligible(node, job)]


def _eligible(node: ComputeNode, job: Job) -> bool:
    """A node whose job preparation task failed (with waitForSuccess) runs none of the job's tasks."""
    record = job.preparation.get(node.id)
    prep = job.spec.get("jobPreparationTask") or {}
    return (
        record is None
        or record.get("state") == "running"
        or record.get("result") == "success"
        or not prep.get("waitForSuccess", True)
    )

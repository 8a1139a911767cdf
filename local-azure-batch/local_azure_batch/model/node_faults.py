"""A node that fails under its tasks: ``unusable``, with the errors that say why.

Batch leaves a node ``unusable`` when it cannot run tasks on it (a disk that is full, a network that blocks its
agent, a mount that failed: "The Compute Node cannot be used for Task execution due to errors", its ``errors``
naming them). The local service does so itself for a failed mount or image prefetch (model/allocation.py); for
the causes it cannot bring about on one machine, a test asks for it on the administration API
(``POST /_emulator/pools/{pool}/nodes/{node}/unusable``, with the errors). The tasks running on the node are
requeued, as a preempted Spot node's are (not as a retry, nor in ``requeueCount``, which counts requeues on a
user's request); the node keeps its files (the agent's log among them, which ``uploadbatchservicelogs``
uploads) and stays ``unusable`` until it is rebooted, reimaged or removed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .account import Account
from .errors import conflict
from .pools import IDLE, OFFLINE, RUNNING, UNUSABLE, ComputeNode

# The states of a node that is up: the ones a test can make unusable here (so that it knows what fails).
UP_STATES = (IDLE, RUNNING, OFFLINE)
# A task's end reason when its node failed under it (model/execution.py requeues it, uncounted).
NODE_FAILED = "node_failed"


def make_unusable(account: Account, node: ComputeNode, errors: list[dict[str, Any]]) -> None:
    """The node becomes ``unusable`` with ``errors``; its running tasks are requeued."""
    if node.state not in UP_STATES or node.leaving:
        raise conflict(
            "NodeNotUp",
            f"Node {node.id} is {'leaving its pool' if node.leaving else node.state}: only a node that is "
            f"{', '.join(UP_STATES)} can be made unusable here.",
        )
    node.errors = [dict(error) for error in errors]
    node.set_state(UNUSABLE)  # the agent's log says so, with the errors
    for task in list(node.running.values()):
        task.end_reason = NODE_FAILED
    account.spawn(_stop_tasks(account, node))


async def _stop_tasks(account: Account, node: ComputeNode) -> None:
    # A multi-instance task ends on all its nodes when one of them fails, and is requeued whole.
    for task in list(node.running.values()):
        await asyncio.gather(*(account.runner.terminate(handle) for handle in task.run_handles()))
    while node.running:
        await asyncio.sleep(account.settings.tick_seconds)
    account.kick()

"""The life of compute nodes: allocation towards a pool's targets, booting and start tasks, removal."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from typing import Any

from local_azure_batch.lang.image_reference import reference_problem
from local_azure_batch.runner.mounts import MountError, mount_all
from local_azure_batch.runner.process import RunHandle

from .account import Account
from .clock import iso, utcnow
from .node_commands import node_process
from .pools import (
    CREATING,
    IDLE,
    LEAVING_POOL,
    POOL_DELETING,
    PREEMPTED,
    RESIZING,
    START_TASK_FAILED,
    STARTING,
    STEADY,
    STOPPING,
    UNUSABLE,
    WAITING_FOR_START_TASK,
    ComputeNode,
    Pool,
)
from .tasks import (
    CONTAINER_INVALID_IMAGE,
    CONTAINER_INVALID_IMAGE_MESSAGE,
    FAILURE_EXIT_CODE,
    invalid_image_details,
    launch_failure,
)

# A node's error when a mount fails (the service's own code for it is not documented).
MOUNT_FAILED = "MountFailed"
# resizeErrors when the account's quota stops an allocation. The dedicated one is worded as the service
# was recorded saying it; the low-priority message is the same sentence for that quota (a guess).
QUOTA_ERRORS = {
    True: {"code": "AccountCoreQuotaReached", "message": "The specified account has reached core quota"},
    False: {
        "code": "AccountLowPriorityCoreQuotaReached",
        "message": "The specified account has reached low priority core quota",
    },
}


class Allocation:
    def __init__(self, account: Account) -> None:
        self.account = account
        # How many more Spot nodes Azure has capacity for (None: any number); model/spot.py sets it.
        self.spot_room: Callable[[], int | None] = lambda: None
        # Called when a Spot node has left its pool (its capacity may serve a pool seeking some).
        self.spot_freed: Callable[[], None] = lambda: None

    def resize(self, pool: Pool) -> None:
        """Start moving the node count towards the targets."""
        if pool.state == POOL_DELETING:
            return
        pool.set_allocation(RESIZING)
        pool.resize_started = utcnow()
        pool.resize_errors = []
        free = self.account.free_node_quota()
        pool.seeking_spot = False
        for dedicated, target in ((True, pool.target_dedicated), (False, pool.target_low_priority)):
            members = pool.members(dedicated)
            if target > len(members):
                wanted = target - len(members)
                allowed = wanted if free is None else min(wanted, free)
                if allowed < wanted:
                    pool.resize_errors.append(dict(QUOTA_ERRORS[dedicated]))
                if free is not None:
                    free -= allowed
                room = None if dedicated else self.spot_room()
                if room is not None and room < allowed:
                    # No Spot capacity for the rest now: no error, the pool seeks them as Spot pools do.
                    allowed, pool.seeking_spot = room, True
                for _ in range(allowed):
                    pool.node_counter += 1
                    node = ComputeNode(
                        pool,
                        pool.node_counter,
                        dedicated,
                        self.account.settings.task_root,
                        self.account.new_node_address(),
                    )
                    pool.nodes[node.id] = node
                    self.account.spawn(self.boot(node))
            elif target < len(members):
                # The service gives up preempted, idle and still-booting nodes before busy ones.
                order = sorted(
                    members,
                    key=lambda node: (len(node.running), node.state != PREEMPTED, node.state != IDLE, -node.index),
                )
                for node in order[: len(members) - target]:
                    node.leaving = True
                    node.removal = self.account.spawn(self.remove(node, pool.deallocation_option))
        self.check(pool)

    def stop_resize(self, pool: Pool) -> None:
        """Nodes still being allocated are given up (and Spot nodes no longer sought); nodes still to leave stay."""
        pool.set_allocation(STOPPING)
        pool.seeking_spot = False
        for node in list(pool.nodes.values()):
            if node.state == CREATING:
                self.forget(node)
            elif node.leaving and node.state != LEAVING_POOL and node.removal is not None:
                node.removal.cancel()
                node.removal = None
                node.leaving = False

    def check(self, pool: Pool) -> None:
        """A resizing pool whose nodes are all up (or gone) is steady again."""
        if (
            pool.allocation_state == RESIZING
            and not pool.seeking_spot
            and all(node.state not in (CREATING, STARTING) and not node.leaving for node in pool.nodes.values())
        ) or (pool.allocation_state == STOPPING and all(not node.leaving for node in pool.nodes.values())):
            pool.set_allocation(STEADY)

    async def boot(self, node: ComputeNode) -> None:
        """Bring a node up (a new one, or one rebooted, reimaged or started again): starting, its mounts and
        images, its start task, then idle."""
        half = self.account.settings.node_start_seconds / 2
        await asyncio.sleep(half)
        if node.pool.nodes.get(node.id) is not node:
            return
        node.dirs.create()
        node.set_state(STARTING)
        await asyncio.sleep(half)
        if node.pool.nodes.get(node.id) is not node:
            return
        node.last_boot_time = utcnow()
        if not await self._mount(node) or not self._prefetch_images(node):
            return
        start_task = node.pool.spec.get("startTask")
        if start_task is not None:
            if start_task.get("waitForSuccess", True):
                node.set_state(WAITING_FOR_START_TASK)
                self.check(node.pool)
                ok = await self._run_start_task(node, start_task)
                if node.pool.nodes.get(node.id) is not node:
                    return
                node.set_state(node.ready_state if ok else START_TASK_FAILED)
            else:
                node.set_state(node.ready_state)
                self.account.spawn(self._run_start_task(node, start_task))
        else:
            node.set_state(node.ready_state)
        node.recovering = False
        self.check(node.pool)
        self.account.kick()

    def _prefetch_images(self, node: ComputeNode) -> bool:
        """The pool's containerImageNames, pulled before the start task on a real node: one a container engine
        cannot parse leaves the node unusable with ContainerInvalidImage, the code the service reports for an
        image a node cannot pull (that a failed prefetch makes the node unusable is a documented guess)."""
        container = node.pool.spec["virtualMachineConfiguration"].get("containerConfiguration") or {}
        for image in container.get("containerImageNames") or []:
            problem = reference_problem(str(image))
            if problem is not None:
                node.errors = [
                    {
                        "code": CONTAINER_INVALID_IMAGE,
                        "message": CONTAINER_INVALID_IMAGE_MESSAGE,
                        "errorDetails": invalid_image_details(str(image), problem),
                    }
                ]
                node.set_state(UNUSABLE)
                self.check(node.pool)
                self.account.kick()
                return False
        return True

    async def _mount(self, node: ComputeNode) -> bool:
        """The pool's file systems under the node's mount root; a mount that fails leaves the node unusable."""
        configurations = node.pool.spec.get("mountConfiguration") or []
        if not configurations:
            return True
        settings = self.account.settings
        try:
            await mount_all(
                configurations,
                node.dirs.mounts,
                blob_endpoints=settings.blob_endpoints,
                mount_sources=settings.mount_sources,
            )
        except MountError as exc:
            if node.pool.nodes.get(node.id) is node:
                node.errors = [
                    {
                        "code": MOUNT_FAILED,
                        "message": exc.message,
                        "errorDetails": [{"name": name, "value": value} for name, value in exc.details],
                    }
                ]
                node.set_state(UNUSABLE)
                self.check(node.pool)
                self.account.kick()
            return False
        return node.pool.nodes.get(node.id) is node

    def rerun_start_task(self, node: ComputeNode) -> None:
        """Run the pool's start task on ``node`` again (its last run was cut short by a restart of the service)."""
        start_task = node.pool.spec.get("startTask")
        if start_task is not None:
            self.account.spawn(self._run_start_task(node, start_task))

    async def _run_start_task(self, node: ComputeNode, start_task: dict[str, Any]) -> bool:
        attempts = int(start_task.get("maxTaskRetryCount", 0))
        retry = 0
        while True:
            info: dict[str, Any] = {"state": "running", "startTime": iso(utcnow()), "retryCount": retry}
            node.start_task_info = info
            spec = node_process(
                self.account,
                node,
                job_id=None,
                task_id="starttask",
                task_dir=node.dirs.startup,
                command_line=start_task["commandLine"],
                settings=start_task.get("environmentSettings") or [],
                identity=start_task,
            )
            node.agent_log(f"start task started (try {retry + 1}): {start_task['commandLine']}")
            outcome = await self.account.runner.run(spec, RunHandle())
            info.update(state="completed", endTime=iso(outcome.end_time))
            if outcome.ended_by == "launch_failed":
                node.agent_log(f"start task could not start: {outcome.error}", "ERROR")
            else:
                level = "INFO" if outcome.exit_code == 0 else "ERROR"
                node.agent_log(f"start task exited with code {outcome.exit_code}", level)
            if outcome.exit_code is not None:
                info["exitCode"] = outcome.exit_code
            if outcome.exit_code == 0:
                info["result"] = "success"
                return True
            info["result"] = "failure"
            info["failureInfo"] = (
                launch_failure(outcome.error or "")
                if outcome.ended_by == "launch_failed"
                else {key: FAILURE_EXIT_CODE[key] for key in ("category", "code", "message")}
            )
            if attempts != -1 and retry >= attempts:
                return False
            retry += 1

    async def remove(self, node: ComputeNode, option: str) -> None:
        node.leaving = True
        await self.drain(node, option)
        node.set_state(LEAVING_POOL)
        settings = self.account.settings
        await asyncio.sleep(min(settings.delete_seconds, settings.node_start_seconds))
        self.forget(node)
        self.check(node.pool)
        self.account.kick()
        if not node.is_dedicated:
            self.spot_freed()

    async def drain(self, node: ComputeNode, option: str) -> None:
        """Make the node's running tasks go, as the deallocation option says."""
        node.leaving = True
        tasks = list(node.running.values())
        if option in ("requeue", "terminate"):
            for task in tasks:
                task.end_reason = "requeue" if option == "requeue" else "terminate"
                # A multi-instance task ends on all its nodes when one of them goes.
                await asyncio.gather(*(self.account.runner.terminate(handle) for handle in task.run_handles()))
        while node.running:
            await asyncio.sleep(self.account.settings.tick_seconds)

    def forget(self, node: ComputeNode) -> None:
        node.pool.nodes.pop(node.id, None)
        node.dirs.remove()

    async def delete_pool(self, pool: Pool, files_seconds: float = 0.0) -> None:
        """A deleting pool's nodes go (their tasks requeued), then the pool; its task files stay readable for
        ``files_seconds`` at least."""
        await asyncio.gather(*(self.drain(node, "requeue") for node in list(pool.nodes.values())))
        await asyncio.sleep(max(self.account.settings.delete_seconds, files_seconds))
        for node in list(pool.nodes.values()):
            node.dirs.remove()
        shutil.rmtree(self.account.settings.task_root / "pools" / pool.id, ignore_errors=True)
        if self.account.pools.get(pool.key) is pool:
            del self.account.pools[pool.key]
        self.account.kick()

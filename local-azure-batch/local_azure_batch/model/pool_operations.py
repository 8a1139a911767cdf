"""Pool operations and the life of compute nodes: allocation, resizing, autoscale."""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from local_azure_batch.model.base import ServiceBase
from local_azure_batch.rest.errors import (
    BatchServiceError,
    already_exists,
    conflict,
    invalid_property,
    not_found,
)
from local_azure_batch.runner.process import (
    RunHandle,
)

from . import validation as v
from .autoscale import AutoScaleFormulaError, evaluate_formula, validate_formula
from .clock import iso, utcnow
from .durations import parse_duration
from .jobs import COMPLETED_JOB, DELETING
from .pools import (
    CREATING,
    DEALLOCATION_OPTIONS,
    IDLE,
    LEAVING_POOL,
    POOL_DELETING,
    RESIZING,
    START_TASK_FAILED,
    STARTING,
    STEADY,
    STOPPING,
    WAITING_FOR_START_TASK,
    ComputeNode,
    Pool,
    check_autoscale_interval,
    normalize_pool,
)
from .tasks import (
    RUNNING,
    launch_failure,
)

log = logging.getLogger(__name__)

# resizeErrors when the account's quota stops an allocation. The dedicated one is worded as the service
# was recorded saying it; the low-priority message is the same sentence for that quota (a guess).
QUOTA_ERRORS = {
    True: {"code": "AccountCoreQuotaReached", "message": "The specified account has reached core quota"},
    False: {
        "code": "AccountLowPriorityCoreQuotaReached",
        "message": "The specified account has reached low priority core quota",
    },
}


@dataclass
class PoolOperations(ServiceBase):
    # -- pools ----------------------------------------------------------------------------------------
    def create_pool(self, body: Any) -> Pool:
        spec = normalize_pool(body)
        existing = self.pools.get(spec["id"].lower())
        if existing is not None:
            if existing.state == POOL_DELETING:
                raise conflict(
                    "PoolBeingDeleted",
                    "The specified pool has been marked for deletion and is being reclaimed.",
                )
            raise already_exists("Pool")
        return self._add_pool(Pool(spec))

    def _add_pool(self, pool: Pool) -> Pool:
        self.pools[pool.key] = pool
        if pool.spec.get("enableAutoScale"):
            self._run_autoscale(pool, initial=True)
        self._resize(pool)
        return pool

    def get_pool(self, pool_id: str) -> Pool:
        pool = self.pools.get(pool_id.lower())
        if pool is None:
            raise not_found("Pool")
        return pool

    # Lists come back ordered by id, as the service's do.
    def list_pools(self) -> list[Pool]:
        return sorted(self.pools.values(), key=lambda pool: pool.key)

    def delete_pool(self, pool_id: str) -> None:
        pool = self.get_pool(pool_id)
        if pool.state == POOL_DELETING:
            return
        pool.set_state(POOL_DELETING)
        self._spawn(self._delete_pool(pool))

    async def _delete_pool(self, pool: Pool) -> None:
        await asyncio.gather(*(self._drain_node(node, "requeue") for node in list(pool.nodes.values())))
        await asyncio.sleep(self.settings.delete_seconds)
        for node in list(pool.nodes.values()):
            node.dirs.remove()
        shutil.rmtree(self.settings.task_root / "pools" / pool.id, ignore_errors=True)
        if self.pools.get(pool.key) is pool:
            del self.pools[pool.key]
        self.kick()

    def patch_pool(self, pool_id: str, body: Any, replace: bool = False) -> Pool:
        pool = self._active_pool(pool_id)
        if not isinstance(body, dict):
            raise invalid_property("pool", body, "The body must be a JSON object.")
        for name in ("startTask", "metadata", "applicationPackageReferences", "targetNodeCommunicationMode"):
            if name in body or replace:
                if body.get(name) is None:
                    pool.spec.pop(name, None)
                else:
                    pool.spec[name] = body[name]
        pool.touch()
        return pool

    def _active_pool(self, pool_id: str) -> Pool:
        pool = self.get_pool(pool_id)
        if pool.state == POOL_DELETING:
            raise conflict(
                "PoolBeingDeleted", "The specified pool has been marked for deletion and is being reclaimed."
            )
        return pool

    def resize_pool(self, pool_id: str, body: Any) -> Pool:
        pool = self._active_pool(pool_id)
        if pool.spec.get("enableAutoScale"):
            raise conflict(
                "AutoScalingEnabled",
                "The specified pool has automatic scaling enabled; disable it to resize by hand.",
            )
        if pool.allocation_state != STEADY:
            raise conflict("PoolNotSteady", "The specified pool is not in a steady state.")
        if not isinstance(body, dict):
            raise invalid_property("resizeOptions", body, "The body must be a JSON object.")
        for name in ("targetDedicatedNodes", "targetLowPriorityNodes"):
            if v.integer(body, name, minimum=0, maximum=10000) is not None:
                pool.spec[name] = body[name]
        if body.get("resizeTimeout") is not None:
            v.duration(body, "resizeTimeout")
            pool.spec["resizeTimeout"] = body["resizeTimeout"]
        option = v.enum(body, "nodeDeallocationOption", DEALLOCATION_OPTIONS, "requeue")
        pool.deallocation_option = option or "requeue"
        pool.resize_errors = []
        pool.touch()
        self._resize(pool)
        return pool

    def stop_resize(self, pool_id: str) -> Pool:
        pool = self._active_pool(pool_id)
        if pool.allocation_state == RESIZING:
            pool.set_allocation(STOPPING)
            for node in list(pool.nodes.values()):
                if node.state == CREATING:
                    self._forget_node(node)
                elif node.leaving and node.state != LEAVING_POOL and node.removal is not None:
                    node.removal.cancel()
                    node.removal = None
                    node.leaving = False
            errors = []
            if len(pool.members(True)) != pool.target_dedicated:
                errors.append(
                    (
                        "dedicated",
                        "Desired number of dedicated nodes could not be allocated due to a stop resize operation",
                    )
                )
            if len(pool.members(False)) != pool.target_low_priority:
                errors.append(
                    (
                        "low priority",
                        "Desired number of low priority nodes could not be allocated due to a stop resize operation",
                    )
                )
            pool.resize_errors = [{"code": "ResizeStopped", "message": message} for _, message in errors]
            pool.touch()
        return pool

    def enable_autoscale(self, pool_id: str, body: Any) -> Pool:
        pool = self._active_pool(pool_id)
        if not isinstance(body, dict):
            raise invalid_property("autoScaleOptions", body, "The body must be a JSON object.")
        formula = body.get("autoScaleFormula") or pool.spec.get("autoScaleFormula")
        if not formula:
            raise invalid_property("autoScaleFormula", None, "An autoscale formula is required.")
        candidate = dict(pool.spec)
        candidate["autoScaleFormula"] = formula
        candidate["autoScaleEvaluationInterval"] = body.get("autoScaleEvaluationInterval") or pool.spec.get(
            "autoScaleEvaluationInterval"
        )
        check_autoscale_interval(candidate)
        _validate_formula(formula)
        pool.spec.update(
            enableAutoScale=True,
            autoScaleFormula=formula,
            autoScaleEvaluationInterval=candidate["autoScaleEvaluationInterval"],
        )
        pool.touch()
        self._run_autoscale(pool, initial=True)
        self._resize(pool)
        return pool

    def disable_autoscale(self, pool_id: str) -> Pool:
        pool = self._active_pool(pool_id)
        pool.spec["enableAutoScale"] = False
        pool.spec.pop("autoScaleFormula", None)
        pool.spec.pop("autoScaleEvaluationInterval", None)
        pool.auto_scale_run = None
        pool.next_autoscale = None
        pool.touch()
        return pool

    def evaluate_autoscale(self, pool_id: str, body: Any) -> dict[str, Any]:
        pool = self._active_pool(pool_id)
        if not pool.spec.get("enableAutoScale"):
            raise conflict(
                "AutoScalingNotEnabled",
                "The specified pool does not have automatic scaling enabled; enable it before evaluating a formula.",
            )
        formula = body.get("autoScaleFormula") if isinstance(body, dict) else None
        if not formula:
            raise invalid_property("autoScaleFormula", None, "An autoscale formula is required.")
        run: dict[str, Any] = {"timestamp": iso(utcnow())}
        try:
            run["results"] = self._evaluate(pool, formula).results
        except AutoScaleFormulaError as exc:
            run["error"] = _autoscale_error(exc)
        return run

    def _evaluate(self, pool: Pool, formula: str):
        current = {
            "$TargetDedicatedNodes": float(pool.target_dedicated),
            "$TargetLowPriorityNodes": float(pool.target_low_priority),
            "$CurrentDedicatedNodes": float(len(pool.members(True))),
            "$CurrentLowPriorityNodes": float(len(pool.members(False))),
            "$TaskSlotsPerNode": float(pool.task_slots),
        }
        try:
            return evaluate_formula(
                formula,
                _History(pool),
                now=utcnow(),
                current=current,
                sample_period=timedelta(seconds=self.settings.sample_period_seconds),
            )
        except AutoScaleFormulaError as exc:
            if exc.code in _REJECTED_FORMULA_CODES:
                detail = "; ".join(value for _, value in exc.values) or exc.message
                raise invalid_property("autoScaleFormula", formula, f"{exc.message} {detail}".strip()) from None
            raise

    def _run_autoscale(self, pool: Pool, initial: bool = False) -> None:
        formula = pool.spec.get("autoScaleFormula")
        if not formula:
            return
        if initial and not pool.samples:
            # Otherwise the first evaluation, at creation, fails on $PendingTasks.GetSample(1) and the like.
            pool.record_sample(self._pool_sample(pool))
        run: dict[str, Any] = {"timestamp": iso(utcnow())}
        try:
            outcome = self._evaluate(pool, formula)
        except (AutoScaleFormulaError, BatchServiceError) as exc:
            if isinstance(exc, AutoScaleFormulaError):
                run["error"] = _autoscale_error(exc)
            else:
                run["error"] = {"code": exc.code, "message": exc.message}
        else:
            run["results"] = outcome.results
            pool.deallocation_option = outcome.node_deallocation_option
            changed = (pool.target_dedicated, pool.target_low_priority) != (
                outcome.target_dedicated_nodes,
                outcome.target_low_priority_nodes,
            )
            pool.spec["targetDedicatedNodes"] = outcome.target_dedicated_nodes
            pool.spec["targetLowPriorityNodes"] = outcome.target_low_priority_nodes
            # A steady pool short of its targets (a quota stopped it) tries again.
            short = pool.allocation_state == STEADY and (len(pool.members(True)), len(pool.members(False))) != (
                pool.target_dedicated,
                pool.target_low_priority,
            )
            if (changed or short) and not initial:
                self._resize(pool)
        pool.auto_scale_run = run
        interval = (
            self.settings.autoscale_interval_seconds
            if self.settings.autoscale_interval_seconds is not None
            else parse_duration(pool.spec["autoScaleEvaluationInterval"]).total_seconds()
        )
        pool.next_autoscale = utcnow() + timedelta(seconds=interval)

    def remove_nodes(self, pool_id: str, body: Any) -> Pool:
        pool = self._active_pool(pool_id)
        if pool.allocation_state != STEADY:
            raise conflict("PoolNotSteady", "The specified pool is not in a steady state.")
        node_ids = body.get("nodeList") if isinstance(body, dict) else None
        if not node_ids:
            raise invalid_property("nodeList", None, "Give the ids of the nodes to remove.")
        nodes = [self.get_node(pool_id, node_id) for node_id in node_ids]
        option = v.enum(body, "nodeDeallocationOption", DEALLOCATION_OPTIONS, "requeue") or "requeue"
        for node in nodes:
            if node.is_dedicated:
                pool.spec["targetDedicatedNodes"] = max(0, pool.target_dedicated - 1)
            else:
                pool.spec["targetLowPriorityNodes"] = max(0, pool.target_low_priority - 1)
        pool.set_allocation(RESIZING)
        for node in nodes:
            self._spawn(self._remove_node(node, option))
        pool.touch()
        return pool

    def node_counts(self) -> list[dict[str, Any]]:
        states = (
            "creating",
            "deallocated",
            "deallocating",
            "idle",
            "leavingPool",
            "offline",
            "preempted",
            "rebooting",
            "reimaging",
            "running",
            "starting",
            "startTaskFailed",
            "unusable",
            "unknown",
            "upgradingOS",
            "waitingForStartTask",
        )
        out = []
        for pool in self.pools.values():
            entry: dict[str, Any] = {"poolId": pool.id}
            for label, dedicated in (("dedicated", True), ("lowPriority", False)):
                counts = dict.fromkeys(states, 0)
                for node in pool.nodes.values():
                    if node.is_dedicated == dedicated:
                        name = next(s for s in states if s.lower() == node.state)
                        counts[name] += 1
                counts["total"] = sum(counts.values())
                entry[label] = counts
            out.append(entry)
        return out

    # -- allocation -----------------------------------------------------------------------------------
    def _resize(self, pool: Pool) -> None:
        """Start moving the node count towards the targets."""
        if pool.state == POOL_DELETING:
            return
        pool.set_allocation(RESIZING)
        pool.resize_started = utcnow()
        pool.resize_errors = []
        free = self._free_node_quota()
        for dedicated, target in ((True, pool.target_dedicated), (False, pool.target_low_priority)):
            members = pool.members(dedicated)
            if target > len(members):
                wanted = target - len(members)
                allowed = wanted if free is None else min(wanted, free)
                if allowed < wanted:
                    pool.resize_errors.append(dict(QUOTA_ERRORS[dedicated]))
                if free is not None:
                    free -= allowed
                for _ in range(allowed):
                    pool.node_counter += 1
                    node = ComputeNode(pool, pool.node_counter, dedicated, self.settings.task_root)
                    pool.nodes[node.id] = node
                    self._spawn(self._boot_node(node))
            elif target < len(members):
                # The service gives up idle and still-booting nodes before busy ones.
                order = sorted(members, key=lambda node: (len(node.running), node.state != IDLE, -node.index))
                for node in order[: len(members) - target]:
                    node.leaving = True
                    node.removal = self._spawn(self._remove_node(node, pool.deallocation_option))
        self._check_allocation(pool)

    def _free_node_quota(self) -> int | None:
        """How many more nodes the account may hold (None: no limit); nodes on their way out do not count."""
        quota = self.settings.node_quota
        if quota is None:
            return None
        used = sum(1 for pool in self.pools.values() for node in pool.nodes.values() if not node.leaving)
        return max(0, quota - used)

    def _check_allocation(self, pool: Pool) -> None:
        if (
            pool.allocation_state == RESIZING
            and all(node.state not in (CREATING, STARTING) and not node.leaving for node in pool.nodes.values())
        ) or (pool.allocation_state == STOPPING and all(not node.leaving for node in pool.nodes.values())):
            pool.set_allocation(STEADY)

    async def _boot_node(self, node: ComputeNode) -> None:
        half = self.settings.node_start_seconds / 2
        await asyncio.sleep(half)
        if node.pool.nodes.get(node.id) is not node:
            return
        node.dirs.create()
        node.set_state(STARTING)
        await asyncio.sleep(half)
        if node.pool.nodes.get(node.id) is not node:
            return
        node.last_boot_time = utcnow()
        start_task = node.pool.spec.get("startTask")
        if start_task is not None:
            wait = bool(start_task.get("waitForSuccess", True))
            if wait:
                node.set_state(WAITING_FOR_START_TASK)
                self._check_allocation(node.pool)
                ok = await self._run_start_task(node, start_task)
                if node.pool.nodes.get(node.id) is not node:
                    return
                node.set_state(IDLE if ok else START_TASK_FAILED)
            else:
                node.set_state(IDLE)
                self._spawn(self._run_start_task(node, start_task))
        else:
            node.set_state(IDLE)
        self._check_allocation(node.pool)
        self.kick()

    async def _run_start_task(self, node: ComputeNode, start_task: dict[str, Any]) -> bool:
        attempts = int(start_task.get("maxTaskRetryCount", 0))
        retry = 0
        while True:
            info: dict[str, Any] = {"state": "running", "startTime": iso(utcnow()), "retryCount": retry}
            node.start_task_info = info
            spec = self._node_process(
                node,
                job_id=None,
                task_id="starttask",
                task_dir=node.dirs.startup,
                command_line=start_task["commandLine"],
                settings=start_task.get("environmentSettings") or [],
            )
            outcome = await self.runner.run(spec, RunHandle())
            info.update(state="completed", endTime=iso(outcome.end_time))
            if outcome.exit_code is not None:
                info["exitCode"] = outcome.exit_code
            if outcome.exit_code == 0:
                info["result"] = "success"
                return True
            info["result"] = "failure"
            info["failureInfo"] = (
                launch_failure(outcome.error or "")
                if outcome.ended_by == "launch_failed"
                else {
                    "category": "usererror",
                    "code": "FailureExitCode",
                    "message": "The task exited with an exit code representing a failure",
                }
            )
            if attempts != -1 and retry >= attempts:
                return False
            retry += 1

    async def _remove_node(self, node: ComputeNode, option: str) -> None:
        node.leaving = True
        await self._drain_node(node, option)
        node.set_state(LEAVING_POOL)
        await asyncio.sleep(min(self.settings.delete_seconds, self.settings.node_start_seconds))
        self._forget_node(node)
        self._check_allocation(node.pool)
        self.kick()

    async def _drain_node(self, node: ComputeNode, option: str) -> None:
        """Make the node's running tasks go, as the deallocation option says."""
        node.leaving = True
        tasks = list(node.running.values())
        if option in ("requeue", "terminate"):
            for task in tasks:
                task.end_reason = "requeue" if option == "requeue" else "terminate"
                # A multi-instance task ends on all its nodes when one of them goes.
                await asyncio.gather(*(self.runner.terminate(handle) for handle in task.run_handles()))
        while node.running:
            await asyncio.sleep(self.settings.tick_seconds)

    def _forget_node(self, node: ComputeNode) -> None:
        node.pool.nodes.pop(node.id, None)
        node.dirs.remove()

    # -- nodes ----------------------------------------------------------------------------------------
    def get_node(self, pool_id: str, node_id: str) -> ComputeNode:
        pool = self.get_pool(pool_id)
        node = pool.nodes.get(node_id)
        if node is None:
            node = next((item for item in pool.nodes.values() if item.id.lower() == node_id.lower()), None)
        if node is None or node.state == CREATING:
            raise not_found("Node")
        return node

    def list_nodes(self, pool_id: str) -> list[ComputeNode]:
        return [node for node in self.get_pool(pool_id).nodes.values() if node.state != CREATING]

    def _pool_sample(self, pool: Pool) -> dict[str, float]:
        active = running = succeeded = failed = 0
        for job in self.jobs.values():
            if (job.pool_id or "").lower() != pool.key or job.state in (COMPLETED_JOB, DELETING):
                continue
            if job.is_schedulable:
                active += job.active_ready_count()
            running += job.counts[RUNNING]
            succeeded += job.counts["succeeded"]
            failed += job.counts["failed"]
        dedicated = len(pool.members(True))
        low = len(pool.members(False))
        return {
            "$ActiveTasks": float(active),
            "$RunningTasks": float(running),
            "$PendingTasks": float(active + running),
            "$SucceededTasks": float(succeeded),
            "$FailedTasks": float(failed),
            "$CurrentDedicatedNodes": float(dedicated),
            "$CurrentLowPriorityNodes": float(low),
            "$UsableNodeCount": float(sum(1 for node in pool.nodes.values() if node.usable)),
            "$PreemptedNodeCount": 0.0,
        }


class _History:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def samples(self, variable: str):
        return self._pool.samples_of(variable)


# Formulas the service refuses outright rather than recording a failed evaluation.
_REJECTED_FORMULA_CODES = (
    "AutoScalingFormulaSyntaxError",
    "AutoScaleFormulaTooLong",
    "AutoScaleFormulaNotSupportedLocally",
)


def _validate_formula(formula: str) -> None:
    try:
        validate_formula(formula)
    except AutoScaleFormulaError as exc:
        detail = "; ".join(value for _, value in exc.values)
        raise invalid_property("autoScaleFormula", formula, f"{exc.message} {detail}".strip()) from None


def _autoscale_error(exc: AutoScaleFormulaError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.values:
        out["values"] = [{"name": name, "value": value} for name, value in exc.values]
    return out

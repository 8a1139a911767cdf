"""Pool operations: create, get, list, delete, patch, resize, stop resize, autoscale, remove nodes, node counts."""

from __future__ import annotations

from typing import Any

from local_azure_batch.formula import AutoScaleFormulaError

from . import validation as v
from .account import Account
from .allocation import Allocation
from .autoscaling import AutoScaling, error_body, validate_formula
from .clock import iso, utcnow
from .errors import BatchServiceError, already_exists, conflict, invalid_property, pool_quota_reached
from .pools import (
    CREATING,
    DEALLOCATION_OPTIONS,
    NODE_STATES,
    POOL_DELETING,
    RESIZING,
    STEADY,
    ComputeNode,
    Pool,
    check_autoscale_interval,
    normalize_pool,
)


def _being_deleted() -> BatchServiceError:
    return conflict("PoolBeingDeleted", "The specified pool has been marked for deletion and is being reclaimed.")


class PoolOperations:
    def __init__(self, account: Account, allocation: Allocation, autoscaling: AutoScaling) -> None:
        self.account = account
        self.allocation = allocation
        self.autoscaling = autoscaling

    def create_pool(self, body: Any) -> Pool:
        settings = self.account.settings
        spec = normalize_pool(
            body,
            subscription_id=settings.subscription_id,
            extra_vm_sizes=settings.extra_vm_sizes,
            unavailable_vm_sizes=settings.unavailable_vm_sizes,
            region=settings.location,
        )
        existing = self.account.pools.get(spec["id"].lower())
        if existing is not None:
            if existing.state == POOL_DELETING:
                raise _being_deleted()
            raise already_exists("Pool")
        quota = self.account.settings.pool_quota
        if quota is not None and self.account.pool_count() >= quota:
            raise pool_quota_reached()
        return self.add_pool(Pool(spec))

    def add_pool(self, pool: Pool) -> Pool:
        """A pool into the account, created by hand or as a job's auto-pool."""
        self.account.pools[pool.key] = pool
        if pool.spec.get("enableAutoScale"):
            self.autoscaling.run(pool, initial=True)
        self.allocation.resize(pool)
        return pool

    def get_pool(self, pool_id: str) -> Pool:
        return self.account.pool(pool_id)

    # Lists come back ordered by id, as the service's do.
    def list_pools(self) -> list[Pool]:
        return sorted(self.account.pools.values(), key=lambda pool: pool.key)

    def delete_pool(self, pool_id: str, files_seconds: float = 0.0) -> None:
        pool = self.account.pool(pool_id)
        if pool.state == POOL_DELETING:
            return
        pool.set_state(POOL_DELETING)
        self.account.spawn(self.allocation.delete_pool(pool, files_seconds))

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
        pool = self.account.pool(pool_id)
        if pool.state == POOL_DELETING:
            raise _being_deleted()
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
        self.allocation.resize(pool)
        return pool

    def stop_resize(self, pool_id: str) -> Pool:
        pool = self._active_pool(pool_id)
        if pool.allocation_state == RESIZING:
            self.allocation.stop_resize(pool)
            kinds = (
                (True, pool.target_dedicated, "dedicated"),
                (False, pool.target_low_priority, "low priority"),
            )
            pool.resize_errors = [
                {
                    "code": "ResizeStopped",
                    "message": f"Desired number of {label} nodes could not be allocated due to a stop resize operation",
                }
                for dedicated, target, label in kinds
                if len(pool.members(dedicated)) != target
            ]
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
        validate_formula(formula)
        pool.spec.update(
            enableAutoScale=True,
            autoScaleFormula=formula,
            autoScaleEvaluationInterval=candidate["autoScaleEvaluationInterval"],
        )
        pool.touch()
        self.autoscaling.run(pool, initial=True)
        self.allocation.resize(pool)
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
            run["results"] = self.autoscaling.evaluate(pool, formula).results
        except AutoScaleFormulaError as exc:
            run["error"] = error_body(exc)
        return run

    def remove_nodes(self, pool_id: str, body: Any) -> Pool:
        pool = self._active_pool(pool_id)
        if pool.allocation_state != STEADY:
            raise conflict("PoolNotSteady", "The specified pool is not in a steady state.")
        node_ids = body.get("nodeList") if isinstance(body, dict) else None
        if not node_ids:
            raise invalid_property("nodeList", None, "Give the ids of the nodes to remove.")
        nodes = [self.account.node(pool_id, node_id) for node_id in node_ids]
        option = v.enum(body, "nodeDeallocationOption", DEALLOCATION_OPTIONS, "requeue") or "requeue"
        for node in nodes:
            if node.is_dedicated:
                pool.spec["targetDedicatedNodes"] = max(0, pool.target_dedicated - 1)
            else:
                pool.spec["targetLowPriorityNodes"] = max(0, pool.target_low_priority - 1)
        pool.set_allocation(RESIZING)
        for node in nodes:
            self.account.spawn(self.allocation.remove(node, option))
        pool.touch()
        return pool

    def node_counts(self) -> list[dict[str, Any]]:
        out = []
        for pool in self.account.pools.values():
            entry: dict[str, Any] = {"poolId": pool.id}
            for label, dedicated in (("dedicated", True), ("lowPriority", False)):
                counts = {name: 0 for name in NODE_STATES.values()}
                for node in pool.nodes.values():
                    if node.is_dedicated == dedicated:
                        counts[NODE_STATES[node.state]] += 1
                counts["total"] = sum(counts.values())
                entry[label] = counts
            out.append(entry)
        return out

    # -- nodes ----------------------------------------------------------------------------------------
    def get_node(self, pool_id: str, node_id: str) -> ComputeNode:
        return self.account.node(pool_id, node_id)

    def list_nodes(self, pool_id: str) -> list[ComputeNode]:
        """The pool's nodes, including those still booting or leaving (while the pool shrinks or is deleted)."""
        nodes = self.account.pool(pool_id).nodes.values()
        return [node for node in nodes if node.state != CREATING or node.recovering]

"""Autoscale on pools: samples of the account's tasks and nodes, formula evaluations, and the resizes they ask for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from local_azure_batch.formula import AutoScaleFormulaError, AutoScaleOutcome, Sample, evaluate_formula
from local_azure_batch.formula import validate_formula as check_formula
from local_azure_batch.lang.times import parse_duration

from .account import Account
from .allocation import Allocation
from .clock import iso, utcnow
from .errors import BatchServiceError, invalid_property
from .jobs import COMPLETED_JOB, DELETING
from .pools import PREEMPTED, STEADY, Pool
from .tasks import RUNNING

# Formulas the service refuses outright rather than recording a failed evaluation.
_REJECTED_FORMULA_CODES = (
    "AutoScalingFormulaSyntaxError",
    "AutoScaleFormulaTooLong",
    "AutoScaleFormulaNotSupportedLocally",
)


class AutoScaling:
    def __init__(self, account: Account, allocation: Allocation) -> None:
        self.account = account
        self.allocation = allocation

    def evaluate(self, pool: Pool, formula: str) -> AutoScaleOutcome:
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
                sample_period=timedelta(seconds=self.account.settings.sample_period_seconds),
            )
        except AutoScaleFormulaError as exc:
            if exc.code in _REJECTED_FORMULA_CODES:
                detail = "; ".join(value for _, value in exc.values) or exc.message
                raise invalid_property("autoScaleFormula", formula, f"{exc.message} {detail}".strip()) from None
            raise

    def run(self, pool: Pool, initial: bool = False) -> None:
        """One evaluation of the pool's formula; a changed target (or a pool still short of it) resizes."""
        formula = pool.spec.get("autoScaleFormula")
        if not formula:
            return
        if initial and not pool.samples:
            # Otherwise the first evaluation, at creation, fails on $PendingTasks.GetSample(1) and the like.
            self.sample(pool)
        run: dict[str, Any] = {"timestamp": iso(utcnow())}
        try:
            outcome = self.evaluate(pool, formula)
        except AutoScaleFormulaError as exc:
            run["error"] = error_body(exc)
        except BatchServiceError as exc:
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
                self.allocation.resize(pool)
        pool.auto_scale_run = run
        interval = (
            self.account.settings.autoscale_interval_seconds
            if self.account.settings.autoscale_interval_seconds is not None
            else parse_duration(pool.spec["autoScaleEvaluationInterval"]).total_seconds()
        )
        pool.next_autoscale = utcnow() + timedelta(seconds=interval)

    def sample(self, pool: Pool) -> None:
        """Record what the formula variables read now: the pool's jobs' tasks and its nodes."""
        active = running = succeeded = failed = 0
        for job in self.account.jobs.values():
            if (job.pool_id or "").lower() != pool.key or job.state in (COMPLETED_JOB, DELETING):
                continue
            if job.is_schedulable:
                active += job.active_ready_instances()
            # A running multi-instance task is one task here: the documentation says how $ActiveTasks counts
            # one, not how $RunningTasks does, and "the number of tasks in a running state" reads as one.
            running += job.counts[RUNNING]
            succeeded += job.counts["succeeded"]
            failed += job.counts["failed"]
        dedicated = len(pool.members(True))
        low = len(pool.members(False))
        pool.record_sample(
            {
                "$ActiveTasks": float(active),
                "$RunningTasks": float(running),
                "$PendingTasks": float(active + running),
                "$SucceededTasks": float(succeeded),
                "$FailedTasks": float(failed),
                "$CurrentDedicatedNodes": float(dedicated),
                "$CurrentLowPriorityNodes": float(low),
                "$UsableNodeCount": float(sum(1 for node in pool.nodes.values() if node.usable)),
                "$PreemptedNodeCount": float(sum(1 for node in pool.nodes.values() if node.state == PREEMPTED)),
            }
        )


class _History:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def samples(self, variable: str) -> Sequence[Sample]:
        return self._pool.samples_of(variable)


def validate_formula(formula: str) -> None:
    """A formula enable autoscale refuses: the service's 400 InvalidPropertyValue naming the problem."""
    try:
        check_formula(formula)
    except AutoScaleFormulaError as exc:
        detail = "; ".join(value for _, value in exc.values)
        raise invalid_property("autoScaleFormula", formula, f"{exc.message} {detail}".strip()) from None


def error_body(exc: AutoScaleFormulaError) -> dict[str, Any]:
    """``AutoScaleRun.error`` (its values are name/value pairs, unlike the error responses' key/value)."""
    out: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.values:
        out["values"] = [{"name": name, "value": value} for name, value in exc.values]
    return out

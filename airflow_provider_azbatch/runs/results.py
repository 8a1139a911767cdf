"""What a finished run reports: the tasks' outcomes, the summary table, the cost estimate, and whether the
Airflow task succeeds (the XCom result) or fails (the failure report)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_provider_azbatch.compute import load_catalog
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.results.cost import CostReport, auto_pool_cost, node_spans, shared_pool_cost
from airflow_provider_azbatch.results.failure_report import failure_report
from airflow_provider_azbatch.results.outcomes import JobOutcomes
from airflow_provider_azbatch.results.summary import summary_lines
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.state import TERMINAL_JOB_STATES
from airflow_provider_azbatch.workspace.spec import METADATA_KEY as WORKSPACE_METADATA_KEY


@dataclass
class RunResult:
    """How the run ended: ``failure`` (the error message) when the Airflow task must fail, else ``xcom``."""

    job_id: str
    xcom: dict[str, Any]
    failure: str | None = None
    # Tasks in the job, and how many of them ran and failed.
    total: int = 0
    failed: int = 0
    # on_finish_action deleted the job.
    deleted: bool = False

    @property
    def succeeded(self) -> bool:
        return self.failure is None


def workspaces_of(job: Any) -> list[str]:
    """The content hashes of the workspaces the job's tasks got (recorded on the job at submission)."""
    value = next(
        (item.value for item in (getattr(job, "metadata", None) or []) if item.name == WORKSPACE_METADATA_KEY), ""
    )
    return [sha for sha in value.split(",") if sha]


def collect_result(
    hook: Any, watcher: JobWatcher, *, failure_tail_lines: int, log: Any, unfinished_fail: bool = True
) -> RunResult:
    """Read how the job ended, log its summary and cost, and say whether the run succeeded.

    ``unfinished_fail=False``: only tasks that ran and failed make a failure (a job watched from outside).
    """
    state = watcher.state
    job_id = state.job_id
    outcomes = JobOutcomes.collect(hook.list_task_outcomes(job_id), blocked=state.blocked is not None)
    job = hook.get_job(job_id, select=["id", "state", "executionInfo", "metadata"])
    reason = getattr(job.execution_info, "termination_reason", None) if job is not None else None
    counts = hook.get_task_counts(job_id)
    log.info("Batch job %s: %d of %d tasks succeeded", job_id, counts.succeeded, outcomes.total)
    for line in summary_lines(job_id, outcomes):
        log.info("%s", line)
    cost = estimate_cost(hook, watcher, job, outcomes, log)
    for line in cost.lines() if cost is not None else []:
        log.info("%s", line)
    judged = outcomes if unfinished_fail else JobOutcomes(outcomes.listed, outcomes.failed, outcomes.total)
    failure = None
    if judged.unsuccessful:
        failure = run_sync(
            failure_report(
                job_id,
                judged,
                tail_lines=failure_tail_lines,
                terminate_reason=reason,
                log_location=state.log_location,
                blocked=state.blocked,
            ),
            hook,
        )
    xcom = {
        "job_id": job_id,
        "pool_id": state.pool_id,
        "job_state": enum_value(job.state) if job is not None else None,
        "terminate_reason": reason,
        "task_counts": counts.to_json(),
        "tasks": {outcome.id: outcome.to_json() for outcome in outcomes.listed},
        "tasks_truncated": outcomes.total > len(outcomes.listed),
        "workspaces": workspaces_of(job),
        "cost": cost.to_json() if cost is not None else None,
    }
    return RunResult(job_id, xcom, failure, total=outcomes.total, failed=len(outcomes.failed))


def estimate_cost(hook: Any, watcher: JobWatcher, job: Any, outcomes: JobOutcomes, log: Any) -> CostReport | None:
    """What the job cost (an estimate from list prices); None when its pool is not known any more."""
    state = watcher.state
    pool_id = state.pool_id or getattr(getattr(job, "execution_info", None), "pool_id", None)
    try:
        catalog = load_catalog()
        if state.auto_pool_vm_size is not None:
            ended = getattr(getattr(job, "execution_info", None), "end_time", None) or datetime.now(timezone.utc)
            job_state = enum_value(job.state) if job is not None else state.job_state
            if job_state not in TERMINAL_JOB_STATES and pool_id:
                # Still running (a job kept for on_finish_action, a timeout): its nodes as they are now.
                watcher.observe_nodes(hook.list_pool_nodes(pool_id), time.time())
            return auto_pool_cost(state.auto_pool_vm_size, node_spans(state.nodes, ended), outcomes.listed, catalog)
        if pool_id is None:
            return None
        pool = hook.get_pool(pool_id, select=["id", "vmSize", "taskSlotsPerNode"])
        if pool is None:
            return None
        dedicated = {node.id: node.dedicated for node in hook.list_pool_nodes(pool_id) or []}
        return shared_pool_cost(pool.vm_size, pool.task_slots_per_node or 1, dedicated, outcomes.listed, catalog)
    except Exception as exc:  # an estimate must never fail the task
        log.warning("No cost estimate for Batch job %s: %s", state.job_id, describe_error(exc))
        return None

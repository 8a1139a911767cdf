"""What a finished run reports: the tasks' outcomes, the summary table, the cost estimate, and whether the
Airflow task succeeds (the XCom result) or fails (the failure report)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compute import load_catalog
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.model.outcomes import JobOutcomes
from airflow_provider_azbatch.model.verdict import ENDED_STATES, TASK_FAILED
from airflow_provider_azbatch.results.cost import (
    CostReport,
    IdlePool,
    auto_pool_cost,
    auto_pool_idle,
    idle_pool_lines,
    node_spans,
    sampled_idle_pool,
    shared_pool_cost,
)
from airflow_provider_azbatch.results.failure_report import failure_report, side_task_failures
from airflow_provider_azbatch.results.preemptions import PreemptionReport
from airflow_provider_azbatch.results.summary import summary_lines
from airflow_provider_azbatch.results.task_results import ResultFileError, read_results
from airflow_provider_azbatch.specs.tasks import SKIP_CODES
from airflow_provider_azbatch.specs.workspace import METADATA_KEY as WORKSPACE_METADATA_KEY
from airflow_provider_azbatch.specs.workspace import STAGED_METADATA_KEY
from airflow_provider_azbatch.submission.request import JobRequest
from airflow_provider_azbatch.watching import idle_time
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_sync
from airflow_provider_azbatch.watching.gaps import nodes_unread
from airflow_provider_azbatch.watching.preemption import requeues
from airflow_provider_azbatch.watching.state import WatchState

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

# Failed tasks named in the reason of a skip.
NAMED_SKIPPED = 5
# Nodes whose failed preparation or release task is quoted in the log.
MAX_SIDE_TASK_FAILURES = 3


@dataclass(frozen=True)
class Expectations:
    """What a run expects of its job's end besides "every task succeeded": the first failure ended the job
    (``fail_fast``, for the words of the report), which exit codes skip the Airflow task, and which tasks
    wrote a result file (by task id)."""

    fail_fast: bool = False
    skip_codes: Callable[[str], frozenset[int] | None] = lambda task_id: None
    result_files: Callable[[], dict[str, str]] = dict

    @classmethod
    def of(cls, request: JobRequest) -> Expectations:
        """What a request asks for; its task specs are read again only when needed (a task failed, or the
        request names result files)."""
        by_task: dict[str, tuple[frozenset[int] | None, str | None]] = {}

        def specs() -> dict[str, tuple[frozenset[int] | None, str | None]]:
            if not by_task:
                checked = request.check(rendered=True)
                for spec in checked.specs:
                    by_task[spec.id] = (spec.skip_codes_or(request.skip_codes), spec.result_file or request.result_file)
            return by_task

        def skip_codes(task_id: str) -> frozenset[int] | None:
            return specs().get(task_id, (None, None))[0]

        def result_files() -> dict[str, str]:
            if not request.names_result_files():
                return {}
            return {task: path for task, (_, path) in specs().items() if path}

        return cls(fail_fast=request.fail_fast, skip_codes=skip_codes, result_files=result_files)


@dataclass
class RunResult:
    """How the run ended: ``failure`` (the error message) when the Airflow task must fail, ``skipped`` (why)
    when it is skipped, else ``xcom``."""

    job_id: str
    xcom: dict[str, Any]
    failure: str | None = None
    skipped: str | None = None
    # Tasks in the job, and how many of them ran and failed.
    total: int = 0
    failed: int = 0
    # Where the tasks' logs (and result files) were uploaded, if they were.
    log_location: dict[str, str] | None = None
    # on_finish_action deleted the job.
    deleted: bool = False
    # Nodes that ran the job's tasks (of the first tasks listed), when the job started, and the blobs staged for
    # its tasks ((container, blob name): workspaces, a TaskFlow function's call): what lineage reports.
    nodes: int = 0
    started_at: datetime | None = None
    staged_blobs: tuple[tuple[str, str], ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.failure is None and self.skipped is None


def workspaces_of(job: Any) -> list[str]:
    """The content hashes of the workspaces the job's tasks got (recorded on the job at submission)."""
    value = next(
        (item.value for item in (getattr(job, "metadata", None) or []) if item.name == WORKSPACE_METADATA_KEY), ""
    )
    return [sha for sha in value.split(",") if sha]


def staged_blobs_of(job: Any) -> tuple[tuple[str, str], ...]:
    """The (container, blob name) of each file staged for the job's tasks (recorded on the job at submission)."""
    value = next(
        (item.value for item in (getattr(job, "metadata", None) or []) if item.name == STAGED_METADATA_KEY), ""
    )
    pairs = (entry.partition("/") for entry in value.split(",") if "/" in entry)
    return tuple((container, name) for container, _, name in pairs)


def skip_reason(
    job_id: str, outcomes: JobOutcomes, terminate_reason: str | None, blocked: bool, expectations: Expectations
) -> str | None:
    """Why the Airflow task is skipped: every task that failed exited with one of its skip codes, and the rest
    that did not succeed only ended (or never ran) because of them."""
    failed = outcomes.failed
    if not failed:
        return None
    for outcome in failed:
        codes = expectations.skip_codes(outcome.id)
        if outcome.exit_code is None or not codes or outcome.exit_code not in codes:
            return None
    consequences = outcomes.ended or outcomes.unfinished
    if consequences and not (blocked or terminate_reason == TASK_FAILED):
        return None  # the job was ended by something else (its wall clock, a user): a failure
    named = ", ".join(f"{outcome.id} (exit code {outcome.exit_code})" for outcome in failed[:NAMED_SKIPPED])
    if len(failed) > NAMED_SKIPPED:
        named += f" and {len(failed) - NAMED_SKIPPED} more"
    plural = "s" if len(failed) > 1 else ""
    return f"Batch job {job_id}: its only failed task{plural} exited with {SKIP_CODES}: {named}"


def collect_result(
    hook: AzureBatchHook,
    watcher: JobWatcher,
    *,
    failure_tail_lines: int,
    log: Log,
    unfinished_fail: bool = True,
    expectations: Expectations | None = None,
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
    spot = spot_report(state, cost)
    for line in spot.lines(job_id) if spot is not None else []:
        log.info("%s", line)
    idle_pools = idle_pools_of(hook, watcher, cost, log)
    for line in idle_pool_lines(idle_pools):
        log.info("%s", line)
    if state.has_preparation:
        _warn_of_side_task_failures(hook, state, failure_tail_lines, log)
    expectations = expectations or Expectations()
    judged = outcomes if unfinished_fail else JobOutcomes(outcomes.listed, outcomes.failed, outcomes.total)
    failure = None
    skipped = (
        skip_reason(job_id, judged, reason, state.blocked is not None, expectations) if judged.unsuccessful else None
    )
    if judged.unsuccessful and skipped is None:
        failure = run_sync(
            failure_report(
                job_id,
                judged,
                tail_lines=failure_tail_lines,
                terminate_reason=reason,
                log_location=state.log_location,
                blocked=state.blocked,
                fail_fast=expectations.fail_fast,
            ),
            hook,
        )
    xcom: dict[str, Any] = {
        "job_id": job_id,
        "pool_id": state.pool_id,
        "job_state": enum_value(job.state) if job is not None else None,
        "terminate_reason": reason,
        "task_counts": counts.to_json(),
        "tasks": {outcome.id: outcome.to_json() for outcome in outcomes.listed},
        "tasks_truncated": outcomes.total > len(outcomes.listed),
        "workspaces": workspaces_of(job),
        "cost": cost.to_json() if cost is not None else None,
        "preemptions": spot.to_json() if spot is not None else None,
        "idle_pools": {pool.pool_id: pool.to_json() for pool in idle_pools},
    }
    if failure is None and skipped is None:
        failure = _add_results(hook, state, expectations, xcom)
    execution = getattr(job, "execution_info", None) if job is not None else None
    return RunResult(
        job_id,
        xcom,
        failure,
        skipped,
        total=outcomes.total,
        failed=len(outcomes.failed),
        log_location=state.log_location,
        nodes=len({outcome.node_id for outcome in outcomes.listed if outcome.node_id}),
        started_at=getattr(execution, "start_time", None),
        staged_blobs=staged_blobs_of(job),
    )


def _add_results(
    hook: AzureBatchHook, state: WatchState, expectations: Expectations, xcom: dict[str, Any]
) -> str | None:
    """Put each task's result file into the XCom result (``results``; a single task's also as
    ``return_value``); the failure if one cannot be read."""
    wanted = expectations.result_files()
    if not wanted:
        return None
    step = read_results(
        state.job_id, wanted, max_bytes=config.get_int("max_result_bytes"), log_location=state.log_location
    )
    try:
        results = run_sync(step, hook)
    except ResultFileError as exc:
        return str(exc)
    xcom["results"] = results
    if len(results) == 1 and state.expected_tasks == 1:
        xcom["return_value"] = next(iter(results.values()))
    return None


def _warn_of_side_task_failures(hook: AzureBatchHook, state: WatchState, tail_lines: int, log: Log) -> None:
    """Failed job release tasks (and preparation tasks the job did not have to wait for, or that failed on
    some nodes only) do not fail the run: they are logged as warnings, with the end of their stderr."""
    blocked_by_preparation = state.blocked is not None and state.blocked["reason"] == "preparation"
    try:
        runs = [
            run
            for run in hook.list_preparation_status(state.job_id)
            if run.failed and not (blocked_by_preparation and run.kind == "preparation")
        ]
        for kind in ("preparation", "release"):
            failed = [run.to_json() for run in runs if run.kind == kind][:MAX_SIDE_TASK_FAILURES]
            for line in run_sync(side_task_failures(failed, tail_lines, kind), hook) if failed else []:
                log.warning("%s", line)
    except Exception as exc:  # a report of side tasks must never fail the task
        log.warning("Could not read the job preparation and release task status: %s", describe_error(exc))


def idle_pools_of(hook: AzureBatchHook, watcher: JobWatcher, cost: CostReport | None, log: Log) -> list[IdlePool]:
    """What the pools the run used cost idle during it: a pool made for the job from its cost report, the others
    from the watch's samples and one more now."""
    state = watcher.state
    out: list[IdlePool] = []
    try:
        catalog = load_catalog()
        if state.auto_pool_vm_size is not None and state.pool_id is not None and cost is not None:
            out.append(auto_pool_idle(state.pool_id, cost))
        for pool_id in state.pool_idle:
            if state.auto_pool_vm_size is not None and pool_id == state.pool_id:
                continue
            if not nodes_unread(state, pool_id):  # (said once in the log already: not read, nor said, again)
                idle_time.sample(state, pool_id, hook.list_pool_nodes(pool_id), time.time())
            pool = hook.get_pool(pool_id, select=["id", "vmSize"])
            vm_size = pool.vm_size if pool is not None else None
            out.append(sampled_idle_pool(pool_id, state.pool_idle[pool_id], vm_size, catalog))
    except Exception as exc:  # a report must never fail the task
        log.warning("No idle time of the pools of Batch job %s: %s", state.job_id, describe_error(exc))
    return out


def spot_report(state: WatchState, cost: CostReport | None) -> PreemptionReport | None:
    """Requeues and preemptions of a job whose pool may have Spot nodes (None for others)."""
    if state.spot is None:
        return None
    share = 1.0 / cost.slots_per_node if cost is not None and cost.basis == "task time per slot" else 1.0
    return PreemptionReport(
        requeues(state),
        node_share=share,
        hourly_usd=cost.hourly_usd if cost is not None else None,
        fell_back=state.spot.get("fell_back"),
    )


def estimate_cost(
    hook: AzureBatchHook, watcher: JobWatcher, job: Any, outcomes: JobOutcomes, log: Log
) -> CostReport | None:
    """What the job cost (an estimate from list prices); None when its pool is not known any more."""
    state = watcher.state
    pool_id = state.pool_id or getattr(getattr(job, "execution_info", None), "pool_id", None)
    try:
        catalog = load_catalog()
        if state.auto_pool_vm_size is not None:
            ended = getattr(getattr(job, "execution_info", None), "end_time", None) or datetime.now(timezone.utc)
            job_state = enum_value(job.state) if job is not None else state.job_state
            if job_state not in ENDED_STATES and pool_id:
                # Still running (a job kept for on_finish_action, a timeout): its nodes as they are now.
                watcher.observe_nodes(hook.list_pool_nodes(pool_id), time.time())
            return auto_pool_cost(state.auto_pool_vm_size, node_spans(state.nodes, ended), outcomes.listed, catalog)
        if pool_id is None:
            return None
        pool = hook.get_pool(pool_id, select=["id", "vmSize", "taskSlotsPerNode"])
        if pool is None:
            return None
        # Nodes the watch could not read (said once): every node priced as dedicated, not read (nor said) again.
        nodes = [] if nodes_unread(state, pool_id) else hook.list_pool_nodes(pool_id) or []
        dedicated = {node.id: node.dedicated for node in nodes}
        return shared_pool_cost(pool.vm_size, pool.task_slots_per_node or 1, dedicated, outcomes.listed, catalog)
    except Exception as exc:  # an estimate must never fail the task
        log.warning("No cost estimate for Batch job %s: %s", state.job_id, describe_error(exc))
        return None

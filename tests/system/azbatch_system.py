"""What the system-test DAGs share: per-run resource names, the teardown, the watcher, and the pytest entry point.

The ``example_*.py`` files next to this one are runnable DAGs, as the system tests of Airflow's own providers are
(AIP-47): each creates what it needs under names of its own (``ENV_ID``), runs it, checks what came back, and
removes it in a teardown that runs whatever happened before it (trigger rule ``all_done``). A watcher task fails
the DAG run when any other task failed, since a teardown that succeeds would otherwise make the run green.

They run against the account of ``azbatch_default``: in CI the local Batch service (and Azurite for storage); on
a real Batch account when ``AZBATCH_SYSTEM_TEST_CONN`` holds that account's connection (docs/howto/system-tests.md).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from typing import Any

from airflow.sdk import get_current_context, task

# A few characters that keep this session's resources apart from any other's on the same account.
ENV_ID = os.environ.get("AZBATCH_SYSTEM_TEST_ENV_ID") or secrets.token_hex(3)
PREFIX = "azbatch-st"


def resource_name(name: str) -> str:
    """``azbatch-st-<env id>-<name>``: a pool id of this session (Batch ids: letters, digits, '-', '_')."""
    return f"{PREFIX}-{ENV_ID}-{name}"


def this_runs_jobs(hook: Any, dag_id: str, run_id: str) -> list[str]:
    """The ids of the Batch jobs this DAG run submitted: the operator records the task instance in their metadata."""
    wanted = {("airflow_dag_id", dag_id), ("airflow_run_id", run_id)}
    jobs = hook.list_jobs(select=["id", "metadata"])
    return [job.id for job in jobs if wanted <= {(item.name, item.value) for item in job.metadata or []}]


def gone(resource: Any) -> bool:
    """A deleted job or pool: no longer there, or being deleted (Azure takes minutes to remove a pool)."""
    return resource is None or resource.state == "deleting"


@task(trigger_rule="all_done")
def delete_run_resources(pool_ids: list[str]) -> dict[str, list[str]]:
    """The teardown: deletes this run's jobs and the pools it created, whether the run succeeded or not."""
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

    context = get_current_context()
    hook = AzureBatchHook()
    jobs = this_runs_jobs(hook, context["dag"].dag_id, context["run_id"])
    for job_id in jobs:
        hook.delete_job(job_id)
    pools = [pool_id for pool_id in pool_ids if hook.delete_pool(pool_id)]
    print(f"deleted jobs {sorted(jobs)} and pools {pools}")
    return {"jobs": sorted(jobs), "pools": pools}


@task(trigger_rule="one_failed", retries=0)
def watcher() -> None:
    """Fails the DAG run when another task failed (the teardown after it succeeds, which alone would not)."""
    raise RuntimeError("A task of this system test failed: see the failed task's log")


def get_test_run(dag: Any, check: Callable[[Any, list[str]], None]) -> Callable[..., None]:
    """The pytest test of a system-test DAG file: run it with ``dag.test()`` on the target the ``system_target``
    fixture chose (the local service, or the account of ``AZBATCH_SYSTEM_TEST_CONN``), then ``check(run, logs)``
    and that the teardown left nothing of the run behind."""

    def test_run(system_target: str) -> None:
        from airflow_provider_azbatch.hooks.batch import AzureBatchHook
        from tests.airflow_helpers import run_dag

        run, logs = run_dag(dag)
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert run.state == "success", f"{states}\n" + "\n".join(logs[-60:])
        assert states.pop("watcher") == "skipped", states
        assert set(states.values()) == {"success"}, states
        check(run, logs)
        teardown = run.get_task_instance("delete_run_resources").xcom_pull(task_ids="delete_run_resources")
        assert teardown["jobs"], "the teardown found no job of this run"
        hook = AzureBatchHook()
        assert all(gone(hook.get_job(job_id, select=["state"])) for job_id in teardown["jobs"]), teardown
        assert all(gone(hook.get_pool(pool_id, select=["state"])) for pool_id in teardown["pools"]), teardown

    test_run.__doc__ = f"{dag.dag_id}: the DAG runs green on the target account, and leaves nothing behind."
    return test_run

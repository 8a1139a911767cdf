"""What a job cost, from the local service's own node and task times and the catalog's list prices."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG

from airflow_provider_azbatch.compute import load_catalog
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag
from tests.workloads.node_record import Recorder

START = datetime(2026, 1, 1)


def test_an_auto_pool_job_reports_its_node_time_cost_and_idle_share(airflow_db, azbatch_default, batch_client):
    with DAG("cost_auto_pool", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="job",
            batch_pool=BatchPool.auto(requirements={"cpus": 1}, max_nodes=2),
            tasks=[{"id": "a", "command_line": "sleep 2"}, {"id": "b", "command_line": "sleep 2"}],
            poll_interval=0.3,
        )
    recorder = Recorder(batch_client)
    recorder.start()
    try:
        run, logs = run_dag(dag)
    finally:
        recorder.finish()
    assert run.state == "success"
    result = run.get_task_instance("job").xcom_pull(task_ids="job")
    cost = result["cost"]
    hook = AzureBatchHook()
    job = hook.get_job(result["job_id"])
    recorder.read_job(result["job_id"])
    outcomes = {o.id: o for o in hook.list_task_outcomes(result["job_id"])}
    # Two dedicated nodes, paid from their allocation until the job ended (taking its pool with it), idle while
    # none of the job's tasks ran on them: as the service recorded them, within a second.
    ended = job.execution_info.end_time.timestamp()
    recorded_paid, recorded_idle = recorder.figures(result["pool_id"], 0.0, ended)
    assert len([node for node in recorder.nodes.values() if node.pool == result["pool_id"]]) == 2
    paid = cost["node_seconds"]["dedicated"]
    assert paid == pytest.approx(recorded_paid, abs=1.0)
    assert cost["task_seconds"] == round(sum(o.duration_seconds for o in outcomes.values()), 1)
    assert cost["basis"] == "node time"
    vm_size = cost["vm_size"]
    catalog = load_catalog()
    assert cost["estimate_usd"] == round(paid / 3600 * catalog.get(vm_size).hourly_usd, 4)
    assert cost["idle_share"] == pytest.approx(recorded_idle / recorded_paid, abs=1.0 / recorded_paid)
    assert (cost["region"], cost["prices_date"]) == (catalog.region, catalog.retrieved)
    # The log ends with the cost.
    tail = [
        line for line in logs if line.startswith(("Cost estimate:", "  node time:", "  Batch task time:", "  idle:"))
    ]
    assert tail[0].startswith("Cost estimate: $")
    assert tail[1] == f"  node time: {paid / 3600:.3f} h of {vm_size} (dedicated)"
    assert tail[-1] == f"  idle: {cost['idle_share']:.0%} of the paid node time ran no task"
    # What its pool cost idle during the run: the job's own pool, from its node time.
    (idle,) = result["idle_pools"].values()
    assert idle["how"] == "node time"
    assert idle["paid_node_seconds"] == round(paid, 1)
    assert idle["idle_node_seconds"] == pytest.approx(recorded_idle, abs=1.0)
    at = logs.index(next(line for line in logs if line.startswith("Idle nodes during the run")))
    assert logs[at] == f"Idle nodes during the run (paid, running no task): ${idle['idle_usd']:.4f} at list prices"
    assert logs[at + 1] == (
        f"  pool {result['pool_id']} ({vm_size}): {idle['idle_node_seconds'] / 3600:.3f} of {paid / 3600:.3f} paid "
        f"node-h idle, about ${idle['idle_usd']:.4f} at list prices (its node time)"
    )


def test_a_shared_pool_job_is_charged_its_task_time_per_slot(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("cost_shared_pool", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="job", pool_id=shared_pool, command="sleep 1", poll_interval=0.3)
    recorder = Recorder(batch_client, [shared_pool])
    recorder.start()
    try:
        run, logs = run_dag(dag)
    finally:
        recorder.finish()
    assert run.state == "success"
    result = run.get_task_instance("job").xcom_pull(task_ids="job")
    cost = result["cost"]
    hourly = load_catalog().get("standard_d2s_v3").hourly_usd
    assert cost["basis"] == "task time per slot"
    assert cost["idle_share"] is None
    assert cost["task_seconds"] >= 1.0
    assert abs(cost["estimate_usd"] - cost["task_seconds"] / 3600 * hourly / 4) < 1e-4
    # What the shared pool cost idle while the job ran: its two nodes sampled (at the first look, as the counts
    # moved and at the end), between the first and last sample as the service recorded them, within a second.
    idle = result["idle_pools"][shared_pool]
    assert idle["how"] == "sampled"
    recorder.read_job(result["job_id"])
    since, until = (datetime.fromisoformat(idle[key]).timestamp() for key in ("from", "to"))
    recorded_paid, recorded_idle = recorder.figures(shared_pool, since, until)
    assert recorded_paid == pytest.approx(2 * (until - since), abs=0.1)  # two nodes all along
    assert idle["paid_node_seconds"] == pytest.approx(recorded_paid, abs=1.0)
    assert idle["idle_node_seconds"] == pytest.approx(recorded_idle, abs=1.0)
    assert recorded_paid - recorded_idle > 0.5  # the task's second
    # The XCom holds the seconds to 0.1 s and the dollars to 6 places, each from the unrounded seconds.
    rounding = 0.05 / 3600 * hourly + 5e-7
    assert idle["idle_usd"] == pytest.approx(idle["idle_node_seconds"] / 3600 * hourly, abs=rounding)
    line = next(line for line in logs if line.startswith(f"  pool {shared_pool} "))
    assert line.endswith(
        f"paid node-h idle, about ${idle['idle_usd']:.4f} at list prices (its nodes sampled as the job ran)"
    )

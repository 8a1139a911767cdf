"""Spot nodes under a run, against the local Batch service (which preempts Spot nodes and runs out of Spot capacity on
its administration API): preemptions and requeues in the log and the XCom result, and the fallback to dedicated
nodes."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from airflow.sdk import DAG
from azure.batch import models as m
from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch.compute import load_catalog
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool, SpotFallback
from tests.airflow_helpers import run_dag
from tests.workloads.node_record import Recorder

START = datetime(2026, 1, 1)
# Long enough for the test to preempt it while it runs, short enough to end soon on a node that stays.
COMMAND = 'echo "on $AZ_BATCH_NODE_ID (dedicated: $AZ_BATCH_NODE_IS_DEDICATED)"; sleep 3; echo finished'


class Preempter(threading.Thread):
    """Preempts the node a task of the pool's active job runs on, each time it starts, ``times`` times."""

    def __init__(self, service, client, pool_id: str, task_id: str, times: int, after: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.service, self.client, self.pool_id, self.task_id, self.times = service, client, pool_id, task_id, times
        self.after = timedelta(seconds=after)
        self.preempted: list[str] = []
        self.when: list[tuple[str, float]] = []  # (node, when it was preempted)
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def _running(self) -> m.BatchTask | None:
        for job in self.client.list_jobs(filter="state eq 'active'", select=["id", "poolInfo"]):
            if job.pool_info is not None and job.pool_info.pool_id == self.pool_id:
                task = self.client.get_task(job.id, self.task_id)
                return task if task.state == m.BatchTaskState.RUNNING and task.node_info else None
        return None

    def _ran_a_while(self, task: m.BatchTask) -> bool:
        """Running for a second (or ``after``): the run's watch (polling every 0.3 s) has seen the attempt. (One that
        starts and ends between two looks at the job is not seen: see watching/preemption.py.)"""
        return datetime.now(timezone.utc) - task.execution_info.start_time >= self.after

    def run(self) -> None:
        deadline = time.monotonic() + 120
        started: set[object] = set()
        while len(self.preempted) < self.times and not self.stop.is_set() and time.monotonic() < deadline:
            try:
                task = self._running()
                if task is not None and task.execution_info.start_time not in started and self._ran_a_while(task):
                    started.add(task.execution_info.start_time)
                    at = time.time()
                    self.service.preempt(task.node_info.pool_id, task.node_info.node_id)
                    self.when.append((task.node_info.node_id, (at + time.time()) / 2))
                    self.preempted.append(task.node_info.node_id)
            except ResourceNotFoundError:
                pass  # a job listed before its task was added, or deleted since: looked at again
            except Exception as exc:  # reported by the test
                self.errors.append(exc)
            time.sleep(0.1)


def _spot_dag(name: str, pool_id: str, after_preemptions: int, command: str) -> DAG:
    """One task on a shared Spot pool of one node that falls back after ``after_preemptions``."""
    with DAG(f"{name}_{uuid.uuid4().hex[:6]}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="train",
            batch_pool=BatchPool.shared(
                pool_id,
                requirements={"cpus": 1, "low_priority": True},
                max_nodes=1,
                spot_fallback=SpotFallback(after_preemptions=after_preemptions),
            ),
            tasks=[{"id": "train", "command_line": f"/bin/sh -c '{command}'"}],
            poll_interval=0.3,
        )
    return dag


def _run_preempted(dag: DAG, preempter: Preempter, recorder: Recorder) -> tuple[object, list[str]]:
    recorder.start()
    preempter.start()
    try:
        return run_dag(dag)
    finally:
        preempter.stop.set()
        preempter.join(timeout=10)
        recorder.preempted.update(preempter.when)
        recorder.finish()


@pytest.fixture
def spot_capacity(local_batch_service):
    yield local_batch_service.set_spot_capacity
    local_batch_service.set_spot_capacity(None)


def test_a_run_preempted_twice_says_so_falls_back_to_dedicated_nodes_and_succeeds(
    airflow_db, azbatch_default, batch_client, local_batch_service
):
    pool_id = f"spot-{uuid.uuid4().hex[:6]}"
    dag = _spot_dag("spot_twice", pool_id, 2, COMMAND)
    preempter = Preempter(local_batch_service, batch_client, pool_id, "train", times=2)
    recorder = Recorder(batch_client, [pool_id, f"{pool_id}-dedicated"])
    run, logs = _run_preempted(dag, preempter, recorder)
    try:
        assert run.state == "success", logs[-20:]
        assert (len(preempter.preempted), preempter.errors[:1]) == (2, [])
        result = run.get_task_instance("train").xcom_pull(task_ids="train")
        job_id = result["job_id"]
        twin = f"{pool_id}-dedicated"
        # Both preemptions in the log, as they were seen, then the fallback.
        preempted = [line for line in logs if line.startswith("Batch task train was preempted: Azure took back")]
        assert len(preempted) == 2, logs
        assert preempted[0].endswith("and Batch requeued the task (preemption 1 of this task, 1 of the job)")
        assert preempted[1].endswith("and Batch requeued the task (preemption 2 of this task, 2 of the job)")
        assert (
            f"Batch job {job_id} falls back to dedicated nodes: the job's tasks were preempted 2 times "
            "(spot_fallback after_preemptions=2)"
        ) in logs
        assert (
            f"Batch job {job_id} moved from Spot pool {pool_id} to dedicated pool {twin} (autoscaled: it gives its "
            "nodes back once the job is done); its tasks that were running on Spot nodes start over there"
        ) in logs
        # It ended on a dedicated node of the dedicated pool.
        assert "[train] finished" in logs
        assert [line for line in logs if line.startswith("[train] on ")][-1].endswith("(dedicated: true)")
        assert result["pool_id"] == twin
        task = batch_client.get_task(job_id, "train")
        assert task.node_info.pool_id == twin
        # The XCom result: both preemptions, their cost, the fallback.
        spot = result["preemptions"]
        assert (spot["preempted"], spot["requeued"]) == (2, 2)
        assert spot["tasks"]["train"]["preempted"] == 2
        assert spot["tasks"]["train"]["requeued"] == 2
        # Each lost attempt from its start to its node's preemption, as the service recorded them, per slot.
        recorder.read_job(job_id)
        slots = batch_client.get_pool(pool_id).task_slots_per_node
        lost = [
            min(at for node, at in preempter.when if node == a.node and at > a.start) - a.start
            for a in recorder.attempts.values()
            if a.end is None
        ]
        assert len(lost) == 2
        assert spot["lost_node_seconds"] == pytest.approx(sum(lost) / slots, abs=1.0)
        hourly = load_catalog().get(batch_client.get_pool(pool_id).vm_size).hourly_usd
        # Charged like the job's tasks on a shared pool: per task slot (2 per node here).
        assert spot["lost_usd"] == pytest.approx(spot["lost_node_seconds"] / 3600 * hourly, abs=2e-6)
        assert spot["fell_back"]["from_pool"] == pool_id
        assert spot["fell_back"]["to_pool"] == twin
        assert (
            spot["fell_back"]["reason"] == "the job's tasks were preempted 2 times (spot_fallback after_preemptions=2)"
        )
        summary = next(line for line in logs if line.startswith(f"Spot: Batch job {job_id} lost "))
        assert summary.startswith(
            f"Spot: Batch job {job_id} lost 2 task attempt(s) to preemptions (train: 2 preempted, 2 requeued); "
            "the lost attempts ran "
        )
    finally:
        for pool in (pool_id, f"{pool_id}-dedicated"):
            batch_client.begin_delete_pool(pool, polling_interval=1)


def test_a_deferred_run_with_no_spot_capacity_falls_back_to_dedicated_nodes_after_its_time_limit(
    airflow_db, azbatch_default, batch_client, spot_capacity
):
    spot_capacity(0)
    dag_id = f"spot_none_{uuid.uuid4().hex[:6]}"
    with DAG(dag_id, schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="train",
            batch_pool=BatchPool.auto(
                requirements={"cpus": 1, "low_priority": True},
                max_nodes=1,
                spot_fallback=SpotFallback(no_spot_node_within=timedelta(seconds=3)),
            ),
            tasks=[{"id": "train", "command_line": f"/bin/sh -c '{COMMAND}'"}],
            poll_interval=0.3,
            deferrable=True,
        )
    run, logs = run_dag(dag)
    assert run.state == "success", logs[-20:]
    result = run.get_task_instance("train").xcom_pull(task_ids="train")
    job_id = result["job_id"]
    reason = next(line for line in logs if line.startswith(f"Batch job {job_id} falls back to dedicated nodes: "))
    assert reason.startswith(
        f"Batch job {job_id} falls back to dedicated nodes: no Spot node ran the job's waiting tasks for "
    )
    assert reason.endswith(" (spot_fallback no_spot_node_within=3.0 s)")
    assert (
        f"The job's own pool {result['pool_id']} now asks for 1 dedicated nodes and no Spot nodes; its tasks still "
        "running on Spot nodes finish there unless preempted"
    ) in logs
    assert [line for line in logs if line.startswith("[train] on ")][-1].endswith("(dedicated: true)")
    spot = result["preemptions"]
    assert (spot["preempted"], spot["requeued"]) == (0, 0)
    assert spot["fell_back"]["to_pool"] == spot["fell_back"]["from_pool"] == result["pool_id"]
    assert f"Spot: fell back to dedicated nodes at {spot['fell_back']['at']} (" in "\n".join(logs)


def test_a_run_moved_from_spot_to_dedicated_reports_what_each_pool_cost_as_the_service_recorded(
    airflow_db, azbatch_default, batch_client, local_batch_service
):
    """Preempted 4 s into a 25 s task, the job falls back to the dedicated pool: each pool's paid and idle node
    time, and the lost attempt, are what the service's nodes and tasks say, within a second (issue 41)."""
    pool_id = f"spotchk-{uuid.uuid4().hex[:6]}"
    twin = f"{pool_id}-dedicated"
    dag = _spot_dag("spot_figures", pool_id, 1, "sleep 25; echo finished")
    recorder = Recorder(batch_client, [pool_id, twin])
    preempter = Preempter(local_batch_service, batch_client, pool_id, "train", times=1, after=4.0)
    run, logs = _run_preempted(dag, preempter, recorder)
    try:
        assert run.state == "success", logs[-20:]
        result = run.get_task_instance("train").xcom_pull(task_ids="train")
        assert result["pool_id"] == twin
        recorder.read_job(result["job_id"])
        (spot_node,) = preempter.preempted
        pools = result["idle_pools"]
        for pool in (pool_id, twin):
            since, until = (datetime.fromisoformat(pools[pool][key]).timestamp() for key in ("from", "to"))
            paid, idle = recorder.figures(pool, since, until)
            assert pools[pool]["paid_node_seconds"] == pytest.approx(paid, abs=1.0), (pool, recorder.nodes)
            assert pools[pool]["idle_node_seconds"] == pytest.approx(idle, abs=1.0), (pool, recorder.nodes)
        # The Spot node ran 4 s of the task before Azure took it back: paid, not idle then.
        assert pools[pool_id]["paid_node_seconds"] > 4.0
        # The dedicated node's paid time less the task's 25 s.
        (last,) = [a for a in recorder.attempts.values() if a.end is not None]
        ran = last.end - last.start
        assert ran >= 25.0
        assert pools[twin]["idle_node_seconds"] == pytest.approx(pools[twin]["paid_node_seconds"] - ran, abs=1.0)
        # The attempt lost to the preemption: from its start to the preemption, per slot of the Spot pool's node.
        (lost,) = [a for a in recorder.attempts.values() if a.node == spot_node and a.end is None]
        slots = batch_client.get_pool(pool_id).task_slots_per_node
        spot = result["preemptions"]
        assert spot["lost_node_seconds"] == pytest.approx(
            (dict(preempter.when)[spot_node] - lost.start) / slots, abs=1.0
        )
        assert spot["lost_node_seconds"] * slots >= 4.0 - 1.0
    finally:
        for pool in (pool_id, twin):
            batch_client.begin_delete_pool(pool, polling_interval=1)

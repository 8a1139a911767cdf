"""What the autoscale variables read on a pool: task counts as the Batch documentation defines them."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azure.batch import models as m

from tests import sdk_models
from tests.helpers import sh, wait_until

READ = "a = max($ActiveTasks.GetSample(1)); r = max($RunningTasks.GetSample(1)); p = max($PendingTasks.GetSample(1));"


def _evaluated(client, pool_id: str) -> dict[str, str]:
    results = client.evaluate_pool_auto_scale(pool_id, m.BatchPoolEvaluateAutoScaleOptions(auto_scale_formula=READ))
    values = dict(item.split("=", 1) for item in (results.results or "").split(";") if "=" in item)
    return {name: values.get(name) for name in ("a", "r", "p")}


def test_a_multi_instance_task_counts_as_its_instances_in_active_tasks_and_once_while_it_runs(batch_client):
    client = batch_client
    pool_id = f"samples-{uuid.uuid4().hex[:8]}"
    client.create_pool(
        m.BatchPoolCreateOptions(
            id=pool_id,
            vm_size="standard_d2s_v3",
            virtual_machine_configuration=sdk_models.UBUNTU,
            enable_inter_node_communication=True,
            enable_auto_scale=True,
            auto_scale_formula="$TargetDedicatedNodes = 0;",
            auto_scale_evaluation_interval=timedelta(minutes=5),
        )
    )
    job_id = f"samples-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    try:
        client.create_task(
            job_id,
            m.BatchTaskCreateOptions(
                id="mpi",
                command_line=sh("sleep 3"),
                multi_instance_settings=m.MultiInstanceSettings(
                    number_of_instances=3, coordination_command_line="true"
                ),
            ),
        )
        client.create_task(job_id, m.BatchTaskCreateOptions(id="single", command_line="true"))
        # Queued: three instances and one task are active (the documentation's count), four pending.
        wait_until(
            lambda: _evaluated(client, pool_id) == {"a": "4", "r": "0", "p": "4"}, what="4 active task instances"
        )
        client.enable_pool_auto_scale(
            pool_id, m.BatchPoolEnableAutoScaleOptions(auto_scale_formula="$TargetDedicatedNodes = 3;")
        )
        # Running on its three nodes, the multi-instance task is one running task; the other still waits.
        wait_until(
            lambda: _evaluated(client, pool_id) == {"a": "1", "r": "1", "p": "2"},
            what="the multi-instance task running as one task",
        )
    finally:
        client.begin_delete_job(job_id, polling_interval=1).result()
        client.begin_delete_pool(pool_id, polling_interval=1).result()

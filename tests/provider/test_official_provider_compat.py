"""A Batch client nobody here wrote works unmodified: the official Airflow Azure provider's hook."""

from __future__ import annotations

import json
import time

from azure.batch import models as m

from tests.helpers import sh


def test_official_airflow_azure_batch_hook_runs_a_task(local_batch_service, monkeypatch):
    from airflow.providers.microsoft.azure.hooks import batch as official

    monkeypatch.setenv(
        "AIRFLOW_CONN_OFFICIAL_BATCH",
        json.dumps(
            {
                "conn_type": "azure_batch",
                "login": local_batch_service.account_name,
                "password": local_batch_service.account_key,
                "extra": {"account_url": local_batch_service.url},
            }
        ),
    )
    # The hook waits 10-15 s between polls; shorten its naps, not its logic.
    real_sleep = time.sleep
    monkeypatch.setattr(official.time, "sleep", lambda seconds: real_sleep(min(seconds, 0.2)))

    hook = official.AzureBatchHook("official_batch")
    pool = hook.configure_pool(
        pool_id="official-pool",
        vm_size="standard_d2s_v3",
        vm_node_agent_sku_id="batch.node.ubuntu 22.04",
        vm_publisher="canonical",
        vm_offer="0001-com-ubuntu-server-jammy",
        vm_sku="22_04-lts",
        target_dedicated_nodes=1,
    )
    hook.create_pool(pool)
    hook.create_pool(pool)  # "already exists" is swallowed by the hook: our 409 must look like the service's
    nodes = hook.wait_for_all_node_state("official-pool", {m.BatchNodeState.IDLE})
    assert len(nodes) == 1
    hook.create_job(hook.configure_job(job_id="official-job", pool_id="official-pool"))
    hook.add_single_task_to_job("official-job", hook.configure_task(task_id="hello", command_line="echo official"))
    hook.add_single_task_to_job("official-job", hook.configure_task(task_id="broken", command_line=sh("exit 2")))
    failed = hook.wait_for_job_tasks_to_complete("official-job", timeout=1)
    assert [task.id for task in failed] == ["broken"]
    output = b"".join(hook.connection.download_task_file("official-job", "hello", "stdout.txt"))
    assert output == b"official\n"
    hook.connection.begin_delete_job("official-job", polling_interval=1).result()
    hook.connection.begin_delete_pool("official-pool", polling_interval=1).result()

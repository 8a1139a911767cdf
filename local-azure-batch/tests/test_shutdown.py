"""Stopping the local service stops every process its tasks started, and removes the task root."""

from __future__ import annotations

from pathlib import Path

from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential

from local_azure_batch.testing import run_local_batch_service
from tests import sdk_models
from tests.helpers import sh, wait_until


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_sigterm_stops_all_task_processes_and_cleans_up(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    task_root = tmp_path / "root"
    with run_local_batch_service(task_root=task_root) as service:
        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        client.create_job(m.BatchJobCreateOptions(id="busy", pool_info=sdk_models.auto_pool_info(nodes=2, slots=2)))
        # Each task leaves a shell and a background child behind.
        command = (
            f"sleep 300 & echo $! > {pid_dir}/$AZ_BATCH_TASK_ID.child; "
            f"echo $$ > {pid_dir}/$AZ_BATCH_TASK_ID.shell; wait"
        )
        client.create_tasks("busy", [m.BatchTaskCreateOptions(id=f"t{i}", command_line=sh(command)) for i in range(4)])
        wait_until(lambda: len(list(pid_dir.glob("*.shell"))) == 4, timeout=30, what="4 running tasks")
        pids = [int(path.read_text()) for path in pid_dir.iterdir()]
        assert all(_alive(pid) for pid in pids)
        assert (task_root / "pools").is_dir()
    assert service.process.returncode == 0
    wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=10, what="task processes gone")
    assert not task_root.exists()

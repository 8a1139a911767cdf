"""The scheduler through TorchX's own Runner, in this process: the dry run, and delete."""

from __future__ import annotations

import json

import pytest

from tests.helpers import wait_until

runner_api = pytest.importorskip("torchx.runner", reason="the [torchx] extra is not installed")

from torchx.components.utils import echo  # noqa: E402


def test_the_dry_run_shows_the_job_its_tasks_and_the_pool_and_submits_nothing(azbatch_default, batch_client):
    before = {job.id for job in batch_client.list_jobs()}
    with runner_api.get_runner() as runner:
        info = runner.dryrun(echo(msg="hello", image="alpine:latest"), "azure_batch", cfg={"priority": 5})
    shown = json.loads(str(info))
    assert shown["account"] == "connection 'azbatch_default'"
    job_id = shown["job"]["id"]
    assert job_id.startswith("torchx-echo-")
    assert shown["app_id"] == f"azbatch_default:{job_id}"
    assert shown["job"]["priority"] == 5
    assert shown["pool"]["kind"] == "auto"
    assert shown["pool"]["vmSize"]
    (task,) = shown["tasks"]
    assert task["commandLine"].startswith("/bin/sh -c ")
    # The role's command, under the replica wrapper (torchx/node.py), which records how it ends.
    assert "_tx_main() (\n  exec echo hello\n)\n_tx_supervise 0'" in task["commandLine"]
    assert task["containerSettings"]["imageName"] == "alpine:latest"
    environment = {item["name"]: item["value"] for item in task["environmentSettings"]}
    # TorchX's job id holds the full app id, as the handle does.
    assert environment["TORCHX_JOB_ID"] == f"azure_batch://torchx/azbatch_default:{job_id}"
    assert {job.id for job in batch_client.list_jobs()} == before


def test_delete_removes_the_apps_job(azbatch_default, batch_client):
    with runner_api.get_runner() as runner:
        handle = runner.run(echo(msg="bye"), "azure_batch", cfg={}, workspace=None)
        job_id = handle.rsplit(":", 1)[1]
        wait_until(lambda: batch_client.get_job(job_id).state == "completed", timeout=120, what="the app")
        runner.delete(handle)
        wait_until(lambda: runner.status(handle) is None, timeout=60, what="the app's job gone")

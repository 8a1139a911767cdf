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


def test_list_shows_the_current_users_apps_another_users_by_the_user_option_or_everyones(azbatch_default, batch_client):
    from airflow_provider_azbatch.torchx.names import current_user

    me = current_user()
    with runner_api.get_runner() as runner:
        mine = runner.run(echo(msg="mine"), "azure_batch", cfg={}, workspace=None)
        theirs = runner.run(echo(msg="theirs"), "azure_batch", cfg={"user": "someone-else"}, workspace=None)
        jobs = [handle.rsplit(":", 1)[1] for handle in (mine, theirs)]
        wait_until(
            lambda: all(batch_client.get_job(job_id).state == "completed" for job_id in jobs),
            timeout=120,
            what="both apps",
        )
        # Who ran it is in the job's metadata.
        metadata = {item.name: item.value for item in batch_client.get_job(mine.rsplit(":", 1)[1]).metadata}
        assert metadata["torchx-user"] == me

        def listed(cfg):
            return {app.app_handle for app in runner.list("azure_batch", cfg)} & {mine, theirs}

        assert listed(None) == {mine}
        assert listed({"user": "someone-else"}) == {theirs}
        assert listed({"user": "*"}) == {mine, theirs}
        with pytest.raises(ValueError, match=r"run option `user` is '\*', which only torchx list takes"):
            runner.dryrun(echo(msg="x"), "azure_batch", cfg={"user": "*"})


def test_describe_native_is_the_job_and_its_tasks_as_batch_holds_them(azbatch_default, batch_client):
    with runner_api.get_runner() as runner:
        handle = runner.run(echo(msg="native"), "azure_batch", cfg={"priority": 7}, workspace=None)
        job_id = handle.rsplit(":", 1)[1]
        info = runner.describe_native(handle)
        assert info is not None
        native = info.request.preview
        assert native["job"]["id"] == job_id
        assert native["job"]["priority"] == 7
        assert native["job"]["poolInfo"]["autoPoolSpecification"]["pool"]["vmSize"]
        assert [task["id"] for task in native["tasks"]] == ["echo"]
        assert "exec echo native" in native["tasks"][0]["commandLine"]
        shown = json.loads(str(info))
        assert shown["app_id"] == f"azbatch_default:{job_id}"
        assert shown["job"]["id"] == job_id
        wait_until(lambda: batch_client.get_job(job_id).state == "completed", timeout=120, what="the app")
        runner.delete(handle)
        wait_until(lambda: runner.describe_native(handle) is None, timeout=60, what="the app's job gone")

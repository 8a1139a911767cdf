"""Roles of different VM sizes on the local Batch service (which takes the catalog's sizes): a job and a pool per
size, read as one app by status, log and list; a role failing on one pool stops the roles on the other."""

from __future__ import annotations

import pytest

runner_api = pytest.importorskip("torchx.runner", reason="the [torchx] extra is not installed")

from torchx.specs import AppDef, AppState, Role, resource  # noqa: E402

from tests.helpers import wait_until  # noqa: E402
from tests.torchx.conftest import job_of, run_until_it_fails  # noqa: E402

pytestmark = pytest.mark.azurite


def sh_role(name: str, script: str, size: str) -> Role:
    """A role running a shell script on the node itself, on the VM size its named resource names."""
    return Role(name, image="", entrypoint="sh", args=["-c", script], resource=resource(h=size))


def test_two_roles_of_different_vm_sizes_run_on_two_pools_as_one_app(azbatch_with_storage, batch_client):
    app = AppDef(
        "two-sizes",
        roles=[
            sh_role("trainer", "echo trained", "azure_nc24ads_a100_v4"),
            sh_role("evaluator", "echo ok", "azure_d4s_v5"),
        ],
    )
    with runner_api.get_runner() as runner:
        handle = runner.run(app, "azure_batch", cfg={}, workspace=None)
        job_id = job_of(handle)
        jobs = {job_id: batch_client.get_job(job_id), f"{job_id}-p2": batch_client.get_job(f"{job_id}-p2")}
        # A pool each, of its roles' size.
        sizes = {key: job.pool_info.auto_pool_specification.pool.vm_size for key, job in jobs.items()}
        assert sizes == {job_id: "standard_nc24ads_a100_v4", f"{job_id}-p2": "standard_d4s_v5"}
        assert {task.id for task in batch_client.list_tasks(job_id)} == {"trainer"}
        assert {task.id for task in batch_client.list_tasks(f"{job_id}-p2")} == {"evaluator"}
        status = wait_until(
            lambda: (found := runner.status(handle)) is not None and found.state == AppState.SUCCEEDED and found,
            timeout=90,
            interval=1,
            what="the app SUCCEEDED",
        )
        pools = {batch_client.get_job(key).execution_info.pool_id for key in jobs}
        assert len(pools) == 2
        assert {role.role: [replica.state for replica in role.replicas] for role in status.roles} == {
            "trainer": [AppState.SUCCEEDED],
            "evaluator": [AppState.SUCCEEDED],
        }
        assert list(runner.log_lines(handle, "evaluator", 0)) == ["ok\n"]
        assert list(runner.log_lines(handle, "trainer", 0)) == ["trained\n"]
        # One app in the list: its first job.
        listed = [item.app_handle for item in runner.list("azure_batch") if job_id in item.app_handle]
        assert listed == [handle]
        # Deleting the app deletes its jobs.
        runner.delete(handle)
        wait_until(
            lambda: not {job.id for job in batch_client.list_jobs()} & set(jobs), timeout=60, what="both jobs deleted"
        )


def test_a_role_failing_on_one_pool_stops_the_roles_on_the_other(azbatch_with_storage, batch_client):
    app = AppDef(
        "two-sizes-fail",
        roles=[
            sh_role("trainer", "sleep 600", "azure_nc24ads_a100_v4"),
            sh_role("evaluator", "echo 'no checkpoint' >&2; exit 3", "azure_d4s_v5"),
        ],
    )
    with runner_api.get_runner() as runner:
        # The status that saw the evaluator's job end stopped the trainer's: it does not sleep its 600 s.
        status, job_id = run_until_it_fails(runner, app, batch_client)
    assert batch_client.get_job(job_id).execution_info.termination_reason == "TorchXReplicaFailed:1/0:3"
    assert status.state == AppState.FAILED
    assert status.msg == (
        "Role 'evaluator' replica 0 failed with exit code 3; the app was stopped (fail fast). Last 1 lines of its "
        "stderr:\n    no checkpoint"
    )
    (trainer,) = (role for role in status.roles if role.role == "trainer")
    assert [replica.state for replica in trainer.replicas] == [AppState.CANCELLED]

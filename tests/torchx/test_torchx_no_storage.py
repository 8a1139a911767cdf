"""An account without a storage account, as a user meets it (``torchx`` command lines): ``run`` refuses a workspace
that cannot reach the nodes, or says before submitting that the role runs without it; ``log`` of an app whose
pool is gone says the output is gone and why, and exits non-zero."""

from __future__ import annotations

from tests.helpers import wait_until
from tests.torchx.conftest import job_of, pool_gone


def test_run_refuses_a_workspace_it_cannot_ship_and_log_says_the_output_went_with_the_pool(
    torchx, workdir, azbatch_default, batch_client
):
    (workdir / "train.py").write_text("print('trained')\n")
    before = {job.id for job in batch_client.list_jobs()}

    # The current directory is torchx's default workspace.
    refused = torchx("run", "-s", "azure_batch", "utils.sh", "echo", "hello")
    assert refused.code != 0
    assert refused.out == ""
    assert (
        f"azure_batch run option `skip_workspace` is off, and role 'sh' has the workspace {workdir}, which cannot "
        "reach the nodes: the Batch account has no storage account to stage it in (give the connection "
        "storage_account_url). Run without a workspace (--workspace ''), or without this one, saying so "
        "(-cfg skip_workspace=True)"
    ) in refused.err
    assert {job.id for job in batch_client.list_jobs()} == before

    run = torchx("run", "-s", "azure_batch", "-cfg", "skip_workspace=True", "utils.sh", "echo", "hello")
    assert run.code == 0, run.err
    notes = [line for line in run.err.splitlines() if line.startswith("azure_batch: ")]
    assert notes == [
        f"azure_batch: Role 'sh' runs without its workspace {workdir} (skip_workspace): the Batch account has no "
        "storage account to stage it in; the role has only its image's files",
        "azure_batch: The output is not kept after the app ends: its pool goes with it, and the Batch account has "
        "no storage account to keep it in; torchx log reads it while the app runs",
    ]
    job_id = job_of(run.handle)
    wait_until(lambda: pool_gone(batch_client, job_id), timeout=120, what="the app ended and its pool deleted")
    pool_id = batch_client.get_job(job_id).execution_info.pool_id

    log = torchx("log", run.handle)
    assert log.code != 0
    assert log.out == ""
    assert (
        f"azure_batch: The output of role 'sh' replica 0 is gone: its node went with the pool made for the app "
        f"({pool_id}), which Batch deletes with the job, and it was not kept: the Batch account has no storage "
        "account (give the connection storage_account_url; the output is then kept in log_container)"
    ) in log.err
    assert "Traceback" not in log.err

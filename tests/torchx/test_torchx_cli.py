"""The ``azure_batch`` TorchX scheduler as a user meets it: ``torchx`` command lines (subprocesses) against
the local Batch service, with Azurite as the account's storage (workspaces shipped, logs kept)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from azure.batch import models as m
from torchx.specs import AppState

from tests.helpers import wait_until
from tests.torchx import commands
from tests.torchx.commands import argv
from tests.torchx.conftest import job_of

pytestmark = pytest.mark.azurite


def wait_for_job(batch_client, job_id: str, state: str = "completed", timeout: float = 120) -> None:
    wait_until(
        lambda: batch_client.get_job(job_id).state == m.BatchJobState(state),
        timeout=timeout,
        what=f"job {job_id} {state}",
    )


def test_the_688_command_prints_a_handle_then_status_log_list_and_describe_work(
    torchx, azbatch_with_storage, batch_client
):
    run = torchx(*argv(commands.FIRST_APP))  # `torchx` runs python -m torchx.cli.main
    assert run.code == 0, run.err
    handle = run.handle
    assert handle.startswith("azure_batch://torchx/azbatch_default:torchx-echo-")
    wait_for_job(batch_client, job_of(handle))

    status = torchx(*argv(commands.STATUS, handle))
    assert status.code == 0, status.err
    assert "State: SUCCEEDED" in status.out
    assert "*echo[0]:SUCCEEDED (exitcode: 0)" in status.out

    # The app's pool went with it: the output comes from the logs kept in Blob.
    log = torchx(*argv(commands.LOG, handle))
    assert log.code == 0, log.err
    # stdout first, then stderr (where the local service says it runs no container engine).
    assert log.out.splitlines()[0] == "echo/0 hello"

    listed = torchx(*argv(commands.LIST))
    assert listed.code == 0, listed.err
    assert [line.split() for line in listed.out.splitlines() if handle in line] == [[handle, "echo", "SUCCEEDED"]]

    described = torchx(*argv(commands.DESCRIBE, handle))
    assert described.code == 0, described.err
    assert "'entrypoint': 'echo'" in described.out
    assert "'image': 'alpine:latest'" in described.out

    before = {job.id for job in batch_client.list_jobs()}
    dryrun = torchx(*argv(commands.DRYRUN))
    assert dryrun.code == 0, dryrun.err
    assert '"pool"' in dryrun.out, dryrun.out
    assert '"commandLine"' in dryrun.out, dryrun.out
    assert {job.id for job in batch_client.list_jobs()} == before

    deleted = torchx(*argv(commands.DELETE, handle))
    assert deleted.code == 0, deleted.err
    wait_until(
        lambda: job_of(handle) not in {job.id for job in batch_client.list_jobs()}, timeout=60, what="the job deleted"
    )


def test_a_failing_app_a_cancelled_app_a_followed_log_and_the_workspace(
    torchx, workdir, azbatch_with_storage, batch_client
):
    (workdir / "data.txt").write_text("from the workspace\n")
    failing = torchx("run", "-s", "azure_batch", "utils.sh", "sh", "-c", "echo broken >&2; exit 3")
    sleeping = torchx("run", "-s", "azure_batch", "utils.sh", "sleep", "600")
    counting = torchx(
        "run",
        "-s",
        "azure_batch",
        "utils.sh",
        "sh",
        "-c",
        "cat data.txt; for i in 1 2 3; do echo line$i; sleep 1; done",
    )
    for run in (failing, sleeping, counting):
        assert run.code == 0, run.err

    # --tail follows the running app until it ends: every line, in order.
    followed = torchx(*argv(commands.LOG_TAIL, counting.handle))
    assert followed.code == 0, followed.err
    assert followed.out.splitlines() == [
        "sh/0 from the workspace",
        "sh/0 line1",
        "sh/0 line2",
        "sh/0 line3",
    ]

    wait_for_job(batch_client, job_of(failing.handle))
    status = json.loads(torchx("status", "--json", failing.handle).out)
    assert status["state"] == "FAILED"
    # The role, the replica, its exit code and the end of its stderr (the local service's note on its image first).
    assert status["msg"].startswith("Role 'sh' replica 0 failed with exit code 3. Last 2 lines of its stderr:\n")
    assert status["msg"].endswith("\n    broken")
    (replica,) = status["roles"][0]["replicas"]
    assert (replica["state"], json.loads(replica["structured_error_msg"])["errorCode"]) == (AppState.FAILED, "3")

    wait_until(
        lambda: batch_client.get_task(job_of(sleeping.handle), "sh").state == m.BatchTaskState.RUNNING,
        timeout=120,
        what="the sleeping app's task running",
    )
    cancel = torchx(*argv(commands.CANCEL, sleeping.handle))
    assert cancel.code == 0, cancel.err
    wait_for_job(batch_client, job_of(sleeping.handle))
    status = json.loads(torchx("status", "--json", sleeping.handle).out)
    assert status["state"] == "CANCELLED"


def test_the_docs_show_exactly_the_commands_these_tests_run():
    """The page's torchx command lines (a trailing `# ...` says what it prints) are the ones the tests run."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "torchx.md").read_text()
    blocks = re.findall(r"^```shell\n(.*?)^```$", page, flags=re.MULTILINE | re.DOTALL)
    shown = {
        re.sub(r"\s+# .*$", "", line).strip()
        for block in blocks
        for line in block.splitlines()
        if re.match(r"(torchx|python -m torchx)", line)
    }
    assert shown == set(commands.RUN_BY)


def test_a_named_resource_dry_runs_to_its_vm_size_with_its_shared_memory(torchx, azbatch_with_storage):
    dryrun = torchx(*argv(commands.NAMED_RESOURCE))
    assert dryrun.code == 0, dryrun.err
    shown = json.loads(dryrun.out.split("=== SCHEDULER REQUEST ===", 1)[1])
    assert shown["pool"]["vmSize"] == "standard_nc24ads_a100_v4"
    (task,) = shown["tasks"]
    assert task["multiInstanceSettings"]["numberOfInstances"] == 2
    # Half the node's 220 GiB for the DataLoader workers' /dev/shm.
    assert task["containerSettings"]["containerRunOptions"] == "--shm-size=110g"

"""The ``azure_batch`` TorchX scheduler as a user meets it: ``torchx`` command lines (subprocesses) against
the local Batch service, with Azurite as the account's storage (workspaces shipped, logs kept)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from azure.batch import models as m
from torchx.specs import AppState

from tests.helpers import wait_until
from tests.torchx.conftest import job_of

# The acceptance test of the TorchX pull request this provider grew out of (pytorch/torchx#688), verbatim.
COMMAND_688 = (
    "python -m torchx.cli.main run --scheduler azure_batch --scheduler_args image_repo=ghcr.io/pytorch/torchx "
    "utils.echo --image alpine:latest --msg hello"
)

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
    run = torchx(*shlex.split(COMMAND_688)[3:])  # `torchx` runs python -m torchx.cli.main
    assert run.code == 0, run.err
    handle = run.handle
    assert handle.startswith("azure_batch://torchx/azbatch_default:torchx-echo-")
    wait_for_job(batch_client, job_of(handle))

    status = torchx("status", handle)
    assert status.code == 0, status.err
    assert "State: SUCCEEDED" in status.out
    assert "*echo[0]:SUCCEEDED (exitcode: 0)" in status.out

    # The app's pool went with it: the output comes from the logs kept in Blob.
    log = torchx("log", handle)
    assert log.code == 0, log.err
    # stdout first, then stderr (where the local service says it runs no container engine).
    assert log.out.splitlines()[0] == "echo/0 hello"

    listed = torchx("list", "-s", "azure_batch")
    assert listed.code == 0, listed.err
    assert [line.split() for line in listed.out.splitlines() if handle in line] == [[handle, "echo", "SUCCEEDED"]]

    described = torchx("describe", handle)
    assert described.code == 0, described.err
    assert "'entrypoint': 'echo'" in described.out
    assert "'image': 'alpine:latest'" in described.out


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
    followed = torchx("log", "--tail", "--streams", "stdout", counting.handle)
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
    assert status["msg"].startswith(f"Azure Batch job '{job_of(failing.handle)}' failed: 1 of 1 tasks failed")
    assert "Task 'sh' failed with exit code 3" in status["msg"]
    assert "broken" in status["msg"]
    (replica,) = status["roles"][0]["replicas"]
    assert (replica["state"], json.loads(replica["structured_error_msg"])["errorCode"]) == (AppState.FAILED, "3")

    wait_until(
        lambda: batch_client.get_task(job_of(sleeping.handle), "sh").state == m.BatchTaskState.RUNNING,
        timeout=120,
        what="the sleeping app's task running",
    )
    cancel = torchx("cancel", sleeping.handle)
    assert cancel.code == 0, cancel.err
    wait_for_job(batch_client, job_of(sleeping.handle))
    status = json.loads(torchx("status", "--json", sleeping.handle).out)
    assert status["state"] == "CANCELLED"


def test_the_docs_show_the_688_command_these_tests_run():
    page = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "torchx.md").read_text()
    assert f"```shell\n{COMMAND_688}\n```" in page

"""Every replica of an app as its own, on the local Batch service with Azurite as the account's storage: fail fast
across roles and replicas, each replica's state, exit code and restarts, which replica a node runs (the primary
last in the host list, tools as a busybox image has them), and each replica's output kept after its pool is gone.

Apps go through TorchX's own Runner in this process (``torchx run``'s code path without a process per command)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

runner_api = pytest.importorskip("torchx.runner", reason="the [torchx] extra is not installed")

from azure.batch import models as m  # noqa: E402
from torchx.schedulers.api import Stream  # noqa: E402
from torchx.specs import AppDef, AppState, Resource, RetryPolicy, Role  # noqa: E402

from tests.helpers import wait_until  # noqa: E402
from tests.torchx.conftest import job_of, pool_gone, run_until_it_fails  # noqa: E402

pytestmark = pytest.mark.azurite

SMALL = Resource(cpu=1, gpu=0, memMB=512)
# What a busybox image has of what the node wrapper uses, and its hostname, which has no -I.
BUSYBOX_TOOLS = ("awk", "cat", "date", "mkdir", "mv", "rm", "sleep", "stat", "wc", "sh")
BUSYBOX_HOSTNAME = """#!/bin/sh
[ "$1" = -I ] && { echo "hostname: invalid option -- 'I'" >&2; exit 1; }
echo node
"""


def sh_role(name: str, script: str, **kwargs) -> Role:
    """A role running a shell script on the node itself (no image: nothing but the script writes to stderr)."""
    return Role(name, image="", entrypoint="sh", args=["-c", script], resource=SMALL, **kwargs)


def replicas_of(status, role: str) -> dict[int, tuple[AppState, str | None, int, str]]:
    """{replica: (state, exit code, restarts, message)} of a role."""
    (found,) = (item for item in status.roles if item.role == role)
    out = {}
    for replica in found.replicas:
        detail = json.loads(replica.structured_error_msg)
        out[replica.id] = (replica.state, detail["errorCode"], detail["restarts"], detail["message"])
    return out


@pytest.fixture
def primary_last(local_batch_service):
    """Multi-instance tasks see the primary's node last in AZ_BATCH_HOST_LIST (Batch does not promise it first)."""
    before = local_batch_service.set_host_list_order("primary-last")
    yield
    local_batch_service.set_host_list_order(before)


@pytest.fixture
def busybox_path(tmp_path: Path) -> str:
    tools = tmp_path / "busybox"
    tools.mkdir()
    for name in BUSYBOX_TOOLS:
        (tools / name).symlink_to(shutil.which(name) or name)
    (tools / "hostname").write_text(BUSYBOX_HOSTNAME)
    (tools / "hostname").chmod(0o755)
    return str(tools)


def test_a_role_that_fails_at_once_fails_the_app_within_a_minute_naming_role_replica_and_exit_code(
    azbatch_with_storage, batch_client
):
    app = AppDef(
        "two-roles",
        roles=[sh_role("trainer", "sleep 600"), sh_role("evaluator", "echo 'no checkpoint to evaluate' >&2; exit 3")],
    )
    with runner_api.get_runner() as runner:
        status, job_id = run_until_it_fails(runner, app, batch_client)
    assert status.state == AppState.FAILED
    assert status.msg == (
        "Role 'evaluator' replica 0 failed with exit code 3; the app was stopped (fail fast). Last 1 lines of its "
        "stderr:\n    no checkpoint to evaluate"
    )
    assert replicas_of(status, "evaluator") == {0: (AppState.FAILED, "3", 0, "exited with code 3")}
    ((state, _, _, message),) = replicas_of(status, "trainer").values()
    assert (state, message) == (AppState.CANCELLED, "stopped: role 'evaluator' replica 0 failed (fail fast)")
    # Batch ended the job (the provider's fail_fast): the trainer did not run its 600 s.
    assert batch_client.get_job(job_id).execution_info.termination_reason == "TaskFailed"


def test_a_replica_on_another_node_that_fails_ends_the_app_at_the_next_status(azbatch_with_storage, batch_client):
    script = 'if [ "$TORCHX_REPLICA_ID" = 1 ]; then echo "replica 1 gives up" >&2; exit 4; fi; sleep 600'
    app = AppDef("replicas", roles=[sh_role("worker", script, num_replicas=2)])
    with runner_api.get_runner() as runner:
        handle = runner.run(app, "azure_batch", cfg={}, workspace=None)
        status = wait_until(
            lambda: (found := runner.status(handle)) is not None and found.state == AppState.FAILED and found,
            timeout=90,
            interval=1,
            what="the app FAILED",
        )
        # The status that saw it ended the job (replica 0 still running then).
        assert status.msg == (
            "Role 'worker' replica 1 failed with exit code 4; the app was stopped (fail fast). Last 1 lines of its "
            "stderr:\n    replica 1 gives up"
        )
        assert replicas_of(status, "worker")[0][0] == AppState.RUNNING
        job_id = job_of(handle)
        # The status ended the job: replica 0 does not sleep its 600 s.
        wait_until(
            lambda: batch_client.get_job(job_id).state == m.BatchJobState.COMPLETED, timeout=60, what="the job ended"
        )
        assert batch_client.get_job(job_id).execution_info.termination_reason == "TorchXReplicaFailed:0/1:4"
        ended = runner.status(handle)
    assert ended.state == AppState.FAILED
    assert ended.msg.startswith("Role 'worker' replica 1 failed with exit code 4; the app was stopped (fail fast).")
    replicas = replicas_of(ended, "worker")
    assert replicas[1] == (AppState.FAILED, "4", 0, "exited with code 4")
    assert replicas[0][0] == AppState.CANCELLED
    assert replicas[0][3] == "stopped: role 'worker' replica 1 failed (fail fast)"


def test_each_replica_has_its_own_state_exit_code_restarts_and_output_after_its_pool_is_gone(
    azbatch_with_storage, batch_client, primary_last
):
    # Replica 1 fails its first run (RetryPolicy.REPLICA restarts it on its node), then succeeds.
    script = (
        'echo "replica $TORCHX_REPLICA_ID"; '
        'if [ "$TORCHX_REPLICA_ID" = 1 ] && [ ! -e "$AZ_BATCH_TASK_DIR/tried" ]; then '
        ': > "$AZ_BATCH_TASK_DIR/tried"; exit 5; fi; sleep 2'
    )
    role = sh_role("worker", script, num_replicas=2, retry_policy=RetryPolicy.REPLICA, max_retries=1)
    with runner_api.get_runner() as runner:
        handle = runner.run(AppDef("restarts", roles=[role]), "azure_batch", cfg={}, workspace=None)
        job_id = job_of(handle)
        wait_until(lambda: pool_gone(batch_client, job_id), timeout=120, what="the app ended and its pool deleted")
        status = runner.status(handle)
        assert status.state == AppState.SUCCEEDED, status.msg
        assert status.num_restarts == 1
        assert replicas_of(status, "worker") == {
            0: (AppState.SUCCEEDED, "0", 0, "exited with code 0"),
            1: (AppState.SUCCEEDED, "0", 1, "exited with code 0 (restarts: 1)"),
        }
        # Both replicas' output, kept in Blob (replica 1's by the job release task on its node).
        assert list(runner.log_lines(handle, "worker", 0)) == ["replica 0\n"]
        assert list(runner.log_lines(handle, "worker", 1, streams=Stream.STDOUT)) == ["replica 1\n", "replica 1\n"]
        assert list(runner.log_lines(handle, "worker", 1, streams=Stream.STDERR)) == [
            "torchx azure_batch: replica 1 exited with code 5: restart 1 of 1\n"
        ]


def test_which_replica_a_node_runs_needs_neither_the_host_list_order_nor_hostname_i(
    azbatch_with_storage, batch_client, primary_last, busybox_path
):
    script = (
        "echo replica=$TORCHX_REPLICA_ID rank0=$TORCHX_RANK0_HOST "
        "master=${AZ_BATCH_MASTER_NODE%:*} first=${AZ_BATCH_HOST_LIST%%,*}; hostname -I || true"
    )
    role = sh_role("rank", script, num_replicas=3, env={"PATH": busybox_path})
    with runner_api.get_runner() as runner:
        handle = runner.run(AppDef("ranks", roles=[role]), "azure_batch", cfg={}, workspace=None)
        job_id = job_of(handle)
        wait_until(lambda: pool_gone(batch_client, job_id), timeout=120, what="the app ended and its pool deleted")
        status = runner.status(handle)
        assert status.state == AppState.SUCCEEDED, status.msg
        lines = {k: list(runner.log_lines(handle, "rank", k)) for k in range(3)}
    said = {k: dict(item.split("=", 1) for item in out[0].split()) for k, out in lines.items()}
    master = said[0]["master"]
    for k in range(3):
        # Each node ran its own replica; every one meets at the primary, which the host list names last.
        assert said[k] == {"replica": str(k), "rank0": master, "master": master, "first": said[k]["first"]}
        assert said[k]["first"] != master
        assert lines[k][1] == "hostname: invalid option -- 'I'\n"
    assert {state for state, *_ in replicas_of(status, "rank").values()} == {AppState.SUCCEEDED}

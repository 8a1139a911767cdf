"""What runs on the nodes for a TorchX role (torchx/node.py), run by ``/bin/sh`` in a directory standing for a
node's; what the scheduler reads back (records, time indexes) and the states it makes of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("torchx.specs", reason="the [torchx] extra is not installed")

from torchx.specs import AppDef, AppState, Resource, RetryPolicy, Role

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.submission import job as submission_job
from airflow_provider_azbatch.torchx import node
from airflow_provider_azbatch.torchx.mapping import job_request
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError
from airflow_provider_azbatch.torchx.records import Record, Times, within
from airflow_provider_azbatch.torchx.states import Carrier, replica_state, with_replicas

# What a busybox image has of what the wrapper uses; its `hostname` has no -I.
BUSYBOX_TOOLS = ("awk", "cat", "date", "mkdir", "mv", "rm", "sleep", "stat", "wc", "sh")
BUSYBOX_HOSTNAME = '#!/bin/sh\n[ "$1" = -I ] && { echo "hostname: invalid option -- \'I\'" >&2; exit 1; }\necho node\n'


@pytest.fixture
def busybox_path(tmp_path: Path) -> str:
    """A PATH with only a busybox image's tools (and its hostname, without -I)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in BUSYBOX_TOOLS:
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    hostname = tools / "hostname"
    hostname.write_text(BUSYBOX_HOSTNAME)
    hostname.chmod(0o755)
    return str(tools)


def run(
    script: str, task_dir: Path, path: str, *, launcher: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """``script`` as Batch runs a task's command (by ``launcher``, when given): stdout and stderr into the task
    directory's files."""
    task_dir.mkdir(parents=True, exist_ok=True)
    environment = {"PATH": path, "AZ_BATCH_TASK_DIR": str(task_dir), **env}
    with (task_dir / "stdout.txt").open("ab") as out, (task_dir / "stderr.txt").open("ab") as err:
        return subprocess.run([*launcher, "/bin/sh", "-c", script], env=environment, stdout=out, stderr=err, timeout=60)


def wait_for_the_replica(task_dir: Path) -> None:
    """Until the replica a coordination command started in its background has ended."""
    deadline = time.monotonic() + 30
    while not (task_dir / node.STATUS_FILE).exists() or record(task_dir).state == "running":
        assert time.monotonic() < deadline, "the replica did not end"
        time.sleep(0.05)


def record(task_dir: Path) -> Record:
    parsed = Record.parse((task_dir / node.STATUS_FILE).read_text())
    assert parsed is not None
    return parsed


def test_a_replica_keeps_its_record_and_when_it_wrote_restarting_in_place(tmp_path, busybox_path):
    task_dir = tmp_path / "task"
    # Fails the first time (its marker not yet there), then succeeds: one restart of the two it may have.
    marker = task_dir / "tried"
    command = node.single_node_command(
        {"GREETING": "hi there"},
        "sh",
        ["-c", f'echo "$GREETING"; echo oops >&2; [ -e {marker} ] && exit 0; : >{marker}; exit 3'],
        workspace=False,
        restarts=2,
    )
    done = run(command, task_dir, busybox_path)
    assert done.returncode == 0
    kept = record(task_dir)
    assert (kept.replica, kept.state, kept.exit_code, kept.restarts) == (0, "succeeded", 0, 1)
    assert kept.started is not None
    assert kept.ended is not None
    assert kept.started <= kept.ended
    assert (task_dir / "stdout.txt").read_text() == "hi there\nhi there\n"
    assert (task_dir / "stderr.txt").read_text() == (
        "oops\ntorchx azure_batch: replica 0 exited with code 3: restart 1 of 2\noops\n"
    )
    times = Times.parse((task_dir / node.TIMES_FILE).read_text())
    # Its last sample has all of the output.
    assert times.samples[-1][1:] == (18, len((task_dir / "stderr.txt").read_bytes()))
    assert times.time_of("stdout", 0) is not None


def test_a_replica_that_fails_for_good_records_its_exit_code(tmp_path, busybox_path):
    task_dir = tmp_path / "task"
    done = run(
        node.single_node_command({}, "sh", ["-c", "exit 7"], workspace=False, restarts=0), task_dir, busybox_path
    )
    assert done.returncode == 7
    kept = record(task_dir)
    assert (kept.state, kept.exit_code, kept.restarts) == ("failed", 7, 0)


def coordination(replicas: int) -> str:
    say = "echo replica=$TORCHX_REPLICA_ID rank0=$TORCHX_RANK0_HOST host=$TORCHX_REPLICA_HOST local=$PET_LOCAL_ADDR"
    return node.coordination_command([({}, "sh", ["-c", say])] * (replicas - 1), workspace=False, restarts=0)


@pytest.mark.parametrize(
    ("hosts", "task", "expected"),
    [
        # Two nodes, the primary (.1) last: the other is the one left.
        ("127.1.0.2,127.1.0.1", "9", "replica=1 rank0=127.1.0.1 host=127.1.0.2 local=127.1.0.2"),
        # Three nodes whose addresses are on no interface of theirs (the local Batch service's): the subtask's
        # number, from its directory.
        ("127.1.0.3,127.1.0.2,127.1.0.1", "2", "replica=2 rank0=127.1.0.1 host= local="),
    ],
)
def test_a_node_knows_its_replica_in_a_busybox_image_whatever_the_host_list_order(
    tmp_path, busybox_path, hosts, task, expected
):
    task_dir = tmp_path / "task" / task
    environment = {
        "AZ_BATCH_HOST_LIST": hosts,
        "AZ_BATCH_MASTER_NODE": "127.1.0.1:6000",
        "AZ_BATCH_IS_CURRENT_NODE_MASTER": "false",
        "AZ_BATCH_NODE_SHARED_DIR": str(tmp_path / "shared"),
        "AZ_BATCH_JOB_ID": "job",
        "AZ_BATCH_TASK_ID": "train",
    }
    # `wait`: the replica runs in the background of the coordination command.
    done = run(coordination(3 if task == "2" else 2), task_dir, busybox_path, **environment)
    assert done.returncode == 0, (task_dir / "stderr.txt").read_text()
    wait_for_the_replica(task_dir)
    assert (task_dir / "stdout.txt").read_text() == expected + "\n"
    assert (task_dir / "stderr.txt").read_text() == ""
    # Registered for the job release task, which keeps its output.
    replica = expected.split()[0].split("=")[1]
    assert (tmp_path / "shared" / "torchx" / "job" / f"train.{replica}").read_text() == f"{task_dir}\n"


IP = shutil.which("ip")


@pytest.fixture
def namespace() -> Iterator[list[str]]:
    """A network namespace of the test's own, removed at the end (also on failure): how to run a command in it."""
    if os.geteuid() != 0:
        pytest.skip("a network namespace needs root")
    if IP is None:
        pytest.skip("iproute2's ip is not installed (apt-get install iproute2)")
    name = f"azbatch-node-{uuid.uuid4().hex[:8]}"
    made = subprocess.run([IP, "netns", "add", name], capture_output=True, text=True, check=False)
    if made.returncode:
        pytest.skip(f"ip netns add failed (no CAP_SYS_ADMIN?): {made.stderr.strip()}")
    try:
        yield [IP, "netns", "exec", name]
    finally:
        subprocess.run([IP, "netns", "delete", name], check=True)


@pytest.mark.parametrize(
    ("address", "others"),
    [
        # As a Batch node's own interface has it (TEST-NET-1, inside the namespace only).
        ("192.0.2.13/24", ("192.0.2.12", "192.0.2.11")),
        # The local Batch service's kind of address.
        ("127.1.0.3/32", ("127.1.0.2", "127.1.0.1")),
    ],
)
def test_a_node_finds_its_own_address_on_its_interface(tmp_path, busybox_path, namespace, address, others):
    """The lookup in /proc/net/fib_trie, reached: the node's address is on an interface of its network namespace.
    Its task directory's number (1) and the host list's order both disagree with what its address says (2)."""
    own = address.split("/")[0]
    interface = [
        f"{IP} link add v0 type veth peer name v1",
        f"{IP} address add {address} dev v0",
        f"{IP} link set v0 up",
    ]
    subprocess.run([*namespace, "/bin/sh", "-ec", "\n".join(interface)], check=True, timeout=30)
    task_dir = tmp_path / "task" / "1"
    environment = {
        "AZ_BATCH_HOST_LIST": ",".join([own, *others]),
        "AZ_BATCH_MASTER_NODE": f"{others[-1]}:6000",
        "AZ_BATCH_IS_CURRENT_NODE_MASTER": "false",
    }
    done = run(coordination(3), task_dir, busybox_path, launcher=namespace, **environment)
    assert done.returncode == 0, (task_dir / "stderr.txt").read_text()
    wait_for_the_replica(task_dir)
    assert (task_dir / "stdout.txt").read_text() == f"replica=2 rank0={others[-1]} host={own} local={own}\n"
    assert record(task_dir).host == own


def test_a_node_that_cannot_tell_its_replica_fails_its_coordination_command_saying_so(tmp_path, busybox_path):
    task_dir = tmp_path / "task" / "wd"  # not a subtask's number
    environment = {
        "AZ_BATCH_HOST_LIST": "127.1.0.3,127.1.0.2,127.1.0.1",
        "AZ_BATCH_MASTER_NODE": "127.1.0.1:6000",
        "AZ_BATCH_IS_CURRENT_NODE_MASTER": "false",
        "AZ_BATCH_NODE_ID": "tvm-2",
    }
    done = run(coordination(3), task_dir, busybox_path, **environment)
    assert done.returncode == 1
    assert (task_dir / "stderr.txt").read_text() == (
        "torchx azure_batch: node tvm-2 cannot tell which replica it runs: none of its addresses is in "
        "AZ_BATCH_HOST_LIST (127.1.0.3,127.1.0.2,127.1.0.1)\n"
    )


class _Blobs(BaseHTTPRequestHandler):
    """Put Blob, as Blob storage answers it: what was put, by path and query."""

    received: dict[str, tuple[str, bytes]] = {}

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received[self.path] = (self.headers["x-ms-blob-type"], body)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def blob_service():
    _Blobs.received = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Blobs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/acct/logs", _Blobs.received
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("uploader", ["curl", "python3"])
def test_the_release_task_uploads_each_replica_of_the_node(tmp_path, blob_service, uploader):
    url, received = blob_service
    shared = tmp_path / "shared"
    registry = shared / "torchx" / "job"
    registry.mkdir(parents=True)
    subtask = tmp_path / "task" / "1"
    subtask.mkdir(parents=True)
    (subtask / "stdout.txt").write_text("rank 1\n")
    (subtask / "stderr.txt").write_text("")
    (subtask / node.STATUS_FILE).write_text("replica=1\nstate=succeeded\nexit_code=0\nrestarts=0\nhost=\n")
    (registry / "train.1").write_text(f"{subtask}\n")
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("cat", "rm", uploader):
        (tools / name).symlink_to(shutil.which(name) or name)
    environment = {
        "PATH": str(tools),
        "AZ_BATCH_NODE_SHARED_DIR": str(shared),
        "AZ_BATCH_JOB_ID": "job",
        "AZ_BATCH_NODE_ID": "tvm-1",
        node.LOGS_URL_ENV: f"{url}?sv=2025&sig=abc",
        node.LOGS_PATH_ENV: "torchx/job",
    }
    done = subprocess.run(["/bin/sh", "-c", node.RELEASE_COMMAND], env=environment, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    blobs = {path: body for path, (kind, body) in received.items() if kind == "BlockBlob"}
    prefix = "/acct/logs/torchx/job/train/replicas/1"
    assert blobs == {
        f"{prefix}/stdout.txt?sv=2025&sig=abc": b"rank 1\n",
        f"{prefix}/stderr.txt?sv=2025&sig=abc": b"",
        f"{prefix}/{node.STATUS_FILE}?sv=2025&sig=abc": (subtask / node.STATUS_FILE).read_bytes(),
    }
    assert not registry.exists()


def test_the_side_tasks_names_are_the_providers():
    assert (node.LOGS_URL_ENV, node.LOGS_PATH_ENV) == (submission_job.LOGS_URL_ENV, submission_job.LOGS_PATH_ENV)


# -- records and states ------------------------------------------------------------------------------------
def test_records_and_time_indexes_read_back():
    assert Record.parse("replica=2\nstate=failed\nexit_code=3\nrestarts=1\nstarted=10\nended=20\nhost=10.0.0.5\n") == (
        Record(2, "failed", 3, 1, 10, 20, "10.0.0.5")
    )
    assert Record.parse("replica=2\nstate=run") is None  # a file being written
    times = Times.parse("100 0 0\n101 6 0\n103 12 4\n")
    assert [times.time_of("stdout", offset) for offset in (0, 5, 6, 11, 12)] == [101, 101, 103, 103, None]
    assert times.time_of("stderr", 0) == 103
    now = 200.0
    # Recorded in second 102: written in the second before it, so maybe after 101.5; in 101: before it.
    assert within(102, 101.5, None, now=now)
    assert not within(101, 101.5, None, now=now)
    # Recorded in 103: maybe written by 102.2; in 104: after it.
    assert within(103, None, 102.2, now=now)
    assert not within(104, None, 102.2, now=now)
    assert within(None, 150, None, now=now)  # not in the index yet: written about now
    assert Record(0, "succeeded", 0, 0, 1, 2, "").end_time == datetime(1970, 1, 1, 0, 0, 2, tzinfo=timezone.utc)


def test_replica_states():
    running, done_ok, done_failed = (
        Carrier("running"),
        Carrier("completed", "success", 0),
        Carrier("completed", "failure", 3),
    )
    ended_itself = Record(1, "failed", 4, 0, 1, 2, "")
    still_running = Record(1, "running", None, 0, 1, None, "")
    # Its own record says how it ended, whatever its subtask says.
    assert replica_state(1, running, ended_itself, job_ended=False, cancelled=False) == AppState.FAILED
    assert replica_state(1, running, still_running, job_ended=False, cancelled=False) == AppState.RUNNING
    assert replica_state(1, Carrier("active"), None, job_ended=False, cancelled=False) == AppState.PENDING
    # Still running when its task ended: stopped.
    assert replica_state(1, done_ok, still_running, job_ended=True, cancelled=False) == AppState.CANCELLED
    assert replica_state(0, done_failed, None, job_ended=True, cancelled=False) == AppState.FAILED
    assert replica_state(0, done_ok, None, job_ended=True, cancelled=True) == AppState.SUCCEEDED
    ended_by_job = Carrier("completed", "failure", 137, "TaskEnded")
    assert replica_state(0, ended_by_job, None, job_ended=True, cancelled=False) == AppState.CANCELLED
    # Another replica without a record of its own (gone with its node, nothing kept): not known.
    assert replica_state(1, done_ok, None, job_ended=True, cancelled=False) == AppState.UNKNOWN
    assert with_replicas(AppState.RUNNING, [AppState.RUNNING, AppState.FAILED]) == AppState.FAILED
    assert with_replicas(AppState.CANCELLED, [AppState.FAILED]) == AppState.CANCELLED


# -- what the mapping asks of Batch ----------------------------------------------------------------------------
def role(**kwargs) -> Role:
    values = {"name": "train", "image": "img:1", "entrypoint": "python", "resource": Resource(cpu=1, gpu=0, memMB=1024)}
    return Role(**{**values, **kwargs})


def request(app: AppDef, *, has_storage: bool = True, **opts):
    notes: list[str] = []
    result = job_request(
        app,
        AzureBatchOpts(**opts),
        job_id="torchx-x-1",
        app_id="c:torchx-x-1",
        has_storage=has_storage,
        note=notes.append,
    )
    return result, notes


def test_retry_policies_as_batch_can_run_them():
    # REPLICA on several replicas: each restarts in place on its node; Batch does not retry the task.
    (spec,) = request(AppDef("x", roles=[role(num_replicas=2, retry_policy=RetryPolicy.REPLICA, max_retries=2)]))[
        0
    ].tasks
    assert "max_retries" not in spec
    assert spec["command_line"].endswith("_tx_supervise 2\n_tx_rc=$?\nsleep 3\nexit $_tx_rc")
    assert "_tx_supervise 2 </dev/null &" in spec["coordination_command"]
    # ROLE (and REPLICA or APPLICATION on one replica of one role): Batch retries the task, on all its nodes.
    for policy in (RetryPolicy.ROLE, RetryPolicy.APPLICATION, RetryPolicy.REPLICA):
        (spec,) = request(AppDef("x", roles=[role(retry_policy=policy, max_retries=2)]))[0].tasks
        assert spec["max_retries"] == 2
        assert spec["command_line"].endswith("_tx_supervise 0")
    # APPLICATION (TorchX's default) across roles: refused, naming what works.
    two_roles = AppDef("x", roles=[role(name="a", max_retries=1), role(name="b")])
    with pytest.raises(AzureBatchValidationError, match=r"role 'a' retry_policy is APPLICATION .* RetryPolicy.ROLE"):
        request(two_roles)


def test_the_job_fails_fast_and_keeps_the_other_replicas_output():
    result, _ = request(AppDef("x", roles=[role(num_replicas=2), role(name="eval")]))
    assert result.fail_fast is True
    assert result.job_preparation.command == node.PREPARATION_COMMAND
    assert (result.job_release.command, result.job_release.log_upload) == (node.RELEASE_COMMAND, True)
    # Replica 0's record and time index are uploaded with its output.
    ((train,), (evaluate,)) = ([spec["outputs"][0]] for spec in result.tasks)
    assert (train.pattern, train.container, train.path) == ("../torchx-*.txt", "torchx-logs", "torchx/torchx-x-1/train")
    assert evaluate.path == "torchx/torchx-x-1/eval"
    # Nothing to keep: no release task, no uploads.
    for kept_nowhere in (
        request(AppDef("x", roles=[role(num_replicas=2)]), has_storage=False)[0],
        request(AppDef("x", roles=[role(num_replicas=2)]), log_container="")[0],
    ):
        assert kept_nowhere.job_release is None
        assert "outputs" not in kept_nowhere.tasks[0]


def test_a_workspace_that_cannot_travel_is_refused_unless_the_user_skips_it(tmp_path):
    from torchx.specs import Workspace

    app = AppDef("x", roles=[role(workspace=Workspace({str(tmp_path): ""}))])
    with pytest.raises(TorchXOptionError) as error:
        request(app, has_storage=False)
    assert str(error.value) == (
        f"azure_batch run option `skip_workspace` is off, and role 'train' has the workspace {tmp_path}, which "
        "cannot reach the nodes: the Batch account has no storage account to stage it in (give the connection "
        "storage_account_url). Run without a workspace (--workspace ''), or without this one, saying so "
        "(-cfg skip_workspace=True)"
    )
    result, notes = request(app, has_storage=False, skip_workspace=True)
    assert "workspace" not in result.tasks[0]
    assert notes[0] == (
        f"Role 'train' runs without its workspace {tmp_path} (skip_workspace): the Batch account has no storage "
        "account to stage it in; the role has only its image's files"
    )

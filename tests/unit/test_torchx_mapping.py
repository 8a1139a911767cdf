"""The AppDef -> Batch job mapping and the state mapping of the ``azure_batch`` TorchX scheduler (pure)."""

from __future__ import annotations

import subprocess

import pytest

torchx_specs = pytest.importorskip("torchx.specs", reason="the [torchx] extra is not installed")

from torchx.specs import AppDef, AppState, BindMount, Resource, Role, VolumeMount, macros  # noqa: E402

from airflow_provider_azbatch.exceptions import AzureBatchValidationError  # noqa: E402
from airflow_provider_azbatch.model.records import TaskCounts  # noqa: E402
from airflow_provider_azbatch.torchx.mapping import job_request, new_job_id  # noqa: E402
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError  # noqa: E402
from airflow_provider_azbatch.torchx.states import app_state  # noqa: E402
from airflow_provider_azbatch.torchx.tasks import role_task  # noqa: E402

APP_ID = "azbatch_default:torchx-train-abc"


def role(**kwargs) -> Role:
    values = {"name": "train", "image": "img:1", "entrypoint": "python", "resource": Resource(cpu=1, gpu=0, memMB=1024)}
    return Role(**{**values, **kwargs})


def request(app: AppDef, **opts):
    notes: list[str] = []
    result = job_request(
        app, AzureBatchOpts(**opts), job_id="torchx-x-1", app_id=APP_ID, has_storage=True, note=notes.append
    )
    return result, notes


def test_a_role_runs_its_command_quoted_with_its_macros_and_environment():
    spec = role_task(
        role(args=["--id", macros.app_id, "it's 1 arg", "$HOME"], env={"RANK0": macros.rank0_env}),
        "train",
        APP_ID,
        workspace=None,
        containers=True,
        single_role=True,
    )
    lines = spec["command_line"].splitlines()
    assert lines[0] == "export TORCHX_REPLICA_ID=0 TORCHX_RANK0_HOST=localhost"
    # The role's command in the replica wrapper (torchx/node.py), which records how it ends.
    assert lines[-4:] == [
        "_tx_main() (",
        f"  exec python --id {APP_ID} 'it'\"'\"'s 1 arg' '$HOME'",
        ")",
        "_tx_supervise 0",
    ]
    assert spec["environment"] == {"RANK0": "TORCHX_RANK0_HOST"}
    assert (spec["image"], spec["num_nodes"], spec["display_name"]) == ("img:1", 1, "train")


def run_coordination(spec: dict, tmp_path, *, host_list: str, master: str, current: bool, task_dir: str) -> str:
    """The coordination command as a node's shell runs it; what the background replica printed."""
    out = tmp_path / "out.txt"
    (tmp_path / task_dir).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "AZ_BATCH_HOST_LIST": host_list,
        "AZ_BATCH_MASTER_NODE": f"{master}:6000",
        "AZ_BATCH_IS_CURRENT_NODE_MASTER": "true" if current else "false",
        "AZ_BATCH_TASK_DIR": str(tmp_path / task_dir),
        "AZ_BATCH_NODE_SHARED_DIR": str(tmp_path / "shared"),
        "AZ_BATCH_JOB_ID": "job",
        "AZ_BATCH_TASK_ID": "train",
    }
    # `wait`: the replica runs in the background of the coordination command.
    script = f"{spec['coordination_command']}\nwait"
    with out.open("w") as stdout:
        subprocess.run(["/bin/sh", "-c", script], env=env, stdout=stdout, check=True, timeout=60)
    return out.read_text()


def test_replicas_run_on_every_node_with_their_own_replica_id_and_the_bare_rank0_host(tmp_path):
    spec = role_task(
        role(
            entrypoint="sh",
            args=[
                "-c",
                f"echo replica={macros.replica_id} rank0=${{{macros.rank0_env}}} "
                "host=$TORCHX_REPLICA_HOST $PET_RDZV_CONF",
            ],
            num_replicas=3,
        ),
        "train",
        APP_ID,
        workspace=None,
        containers=True,
        single_role=True,
    )
    assert spec["num_nodes"] == 3
    assert spec["command_line"].startswith("export TORCHX_REPLICA_ID=0 ")
    # The primary last in the host list (Batch does not document its order): AZ_BATCH_MASTER_NODE names it.
    hosts = "127.1.0.3,127.1.0.2,127.1.0.1"
    # A node of the local Batch service, whose address is on no interface of this machine's: its replica id is
    # its subtask's number, and its address cannot be told.
    assert run_coordination(spec, tmp_path, host_list=hosts, master="127.1.0.1", current=False, task_dir="t/2") == (
        "replica=2 rank0=127.1.0.1 host= is_host=false\n"
    )
    # A node whose address is this machine's (127.0.0.1 is every Linux machine's): its place among the other
    # nodes' addresses, sorted (10.9.9.1 < 127.0.0.1), whatever the list's order and its task directory.
    hosts = "127.0.0.1,10.9.9.9,10.9.9.1"
    assert run_coordination(spec, tmp_path, host_list=hosts, master="10.9.9.9", current=False, task_dir="t/1") == (
        "replica=2 rank0=10.9.9.9 host=127.0.0.1 is_host=false\n"
    )
    # The primary runs replica 0 as the task's own command, not in the coordination command.
    assert run_coordination(spec, tmp_path, host_list=hosts, master="127.0.0.1", current=True, task_dir="t") == ""


def test_the_pool_fits_the_largest_role_and_has_a_node_per_replica():
    app = AppDef(
        "app", roles=[role(name="a", resource=Resource(cpu=2, gpu=0, memMB=4096)), role(name="b", num_replicas=2)]
    )
    result, _ = request(app)
    assert result.pool.kind == "auto"
    assert (result.pool.requirements.cpus, result.pool.requirements.memory_gib, result.pool.max_nodes) == (2, 4, 3)
    assert [task["id"] for task in result.tasks] == ["a", "b"]
    assert result.metadata["torchx-roles"] == '[["a", "a", 1, "python"], ["b", "b", 2, "python"]]'


def test_a_role_no_vm_size_has_is_refused_naming_the_role_and_the_fix():
    app = AppDef("big", roles=[role(name="huge", resource=Resource(cpu=100000, gpu=0, memMB=1024))])
    with pytest.raises(AzureBatchValidationError) as error:
        request(app)
    message = str(error.value)
    assert "role 'huge' resource (cpu=100000" in message
    assert "cannot run on Azure Batch" in message
    assert "-cfg vm_size=" in message


def test_what_batch_cannot_express_is_refused_before_submission():
    with pytest.raises(AzureBatchValidationError, match="role 'train' min_replicas"):
        request(AppDef("x", roles=[role(num_replicas=2, min_replicas=1)]))
    with pytest.raises(AzureBatchValidationError, match=r"role 'train' mounts\[0\] is a VolumeMount"):
        request(AppDef("x", roles=[role(mounts=[VolumeMount("vol", "/data")])]))
    with pytest.raises(AzureBatchValidationError, match="capabilities has rack"):
        request(AppDef("x", roles=[role(resource=Resource(cpu=1, gpu=0, memMB=1024, capabilities={"rack": "a"}))]))
    with pytest.raises(TorchXOptionError, match="`shared_pool` cannot be given with pool_id"):
        request(AppDef("x", roles=[role()]), pool_id="p", shared_pool="q")


def test_bind_mounts_become_container_run_options():
    result, _ = request(AppDef("x", roles=[role(mounts=[BindMount("/mnt/data", "/data", read_only=True)])]))
    # The role's own, before its /dev/shm: half the memory of its node, the cheapest size (standard_f2s_v2, 4 GiB).
    assert result.tasks[0]["container_run_options"] == "--volume /mnt/data:/data:ro --shm-size=2g"
    assert result.containers.run_options is None


def test_job_ids_carry_the_prefix_list_filters_on():
    job_id = new_job_id("my app/with spaces" * 10)
    assert job_id.startswith("torchx-my-app-with-spaces")
    assert len(job_id) <= 64


@pytest.mark.parametrize(
    ("job_state", "reason", "counts", "expected"),
    [
        ("active", None, TaskCounts(active=1), AppState.PENDING),
        ("active", None, TaskCounts(running=1), AppState.RUNNING),
        ("active", None, TaskCounts(running=1, completed=1, failed=1), AppState.RUNNING),
        ("completed", "AllTasksComplete", TaskCounts(completed=2, succeeded=2), AppState.SUCCEEDED),
        ("completed", "AllTasksComplete", TaskCounts(completed=2, succeeded=1, failed=1), AppState.FAILED),
        ("completed", "MaxWallClockTimeExpiry", TaskCounts(active=1), AppState.FAILED),
        ("completed", "TorchXCancel", TaskCounts(completed=1), AppState.CANCELLED),
        ("terminating", "UserTerminate", TaskCounts(running=1), AppState.CANCELLED),
        ("active", None, TaskCounts(completed=1, succeeded=1), AppState.SUCCEEDED),
        # A job being deleted reads as what it ended as; deleted while it ran, it was stopped.
        ("deleting", "AllTasksComplete", TaskCounts(completed=2, succeeded=2), AppState.SUCCEEDED),
        ("deleting", "AllTasksComplete", TaskCounts(completed=2, succeeded=1, failed=1), AppState.FAILED),
        ("deleting", "MaxWallClockTimeExpiry", TaskCounts(active=1), AppState.FAILED),
        ("deleting", "TorchXCancel", TaskCounts(completed=1), AppState.CANCELLED),
        ("deleting", None, TaskCounts(running=1), AppState.CANCELLED),
        ("deleting", None, TaskCounts(completed=1, succeeded=1), AppState.SUCCEEDED),
    ],
)
def test_app_states(job_state, reason, counts, expected):
    assert app_state(job_state, reason, counts) == expected

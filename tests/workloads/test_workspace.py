"""workspace=: local code packed once, staged in Blob (Azurite) by its content hash, unpacked next to every
task - single, fan-out, multi-node and container tasks - against the local Batch service."""

from __future__ import annotations

import hashlib
import io
import tarfile
from datetime import datetime
from pathlib import Path

import pytest
from airflow.sdk import DAG
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.workspace import Workspace, pack
from tests.airflow_helpers import run_dag

pytestmark = pytest.mark.azurite
START = datetime(2026, 1, 1)
CONTAINER = "azbatch-workspaces"


@pytest.fixture
def code(tmp_path) -> Path:
    root = tmp_path / "code"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "hello.py").write_text("import pkg.greet\nprint(pkg.greet.GREETING)\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "greet.py").write_text("GREETING = 'hello from the workspace'\n")
    (root / "pkg" / "__pycache__" / "greet.cpython-311.pyc").write_bytes(b"\0stale")
    (root / "run.sh").write_text("#!/bin/sh\necho run.sh ran\n")
    (root / "run.sh").chmod(0o755)
    (root / "data" / "big.bin").write_bytes(b"x" * 1000)
    (root / "notes.tmp").write_text("scratch")
    (root / ".gitignore").write_text("*.tmp\n")
    (root / ".azbatchignore").write_text("data/\n")
    return root


def _staged(azurite) -> list[str]:
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = service.get_container_client(CONTAINER)
    return sorted(blob.name for blob in container.list_blobs()) if container.exists() else []


def test_packing_ignores_and_names_by_content(code):
    packed = pack(code, max_bytes=10_000_000)
    with tarfile.open(fileobj=io.BytesIO(packed.data)) as archive:
        members = {member.name: member for member in archive.getmembers()}
    assert sorted(members) == [".azbatchignore", ".gitignore", "hello.py", "pkg/__init__.py", "pkg/greet.py", "run.sh"]
    assert members["run.sh"].mode == 0o755
    assert members["hello.py"].mode == 0o644
    assert {member.mtime for member in members.values()} == {0}
    assert packed.sha256 == hashlib.sha256(packed.data).hexdigest()
    assert pack(code, max_bytes=10_000_000).data == packed.data  # the same bytes every time
    (code / "hello.py").write_text("print('edited')\n")
    assert pack(code, max_bytes=10_000_000).sha256 != packed.sha256
    assert pack(code, ignore=["run.sh"], max_bytes=10_000_000).files == 5


def test_the_size_limit_and_a_missing_directory_are_refused(code, tmp_path):
    with pytest.raises(AzureBatchValidationError) as info:
        pack(code, ignore=["!data/"], max_bytes=1000)
    assert str(info.value).startswith(f"workspace {str(code)!r} holds 0.0 MB in")
    assert "over the limit of 0 MB; the largest: data/big.bin (0.0 MB)" in str(info.value)
    assert "raise the limit ([azbatch] workspace_max_mb, Workspace(max_mb=))" in str(info.value)
    with pytest.raises(AzureBatchValidationError, match=r"^workspace '.*/nowhere' is not a directory"):
        pack(tmp_path / "nowhere", max_bytes=1000)


def test_every_kind_of_task_gets_the_workspace_uploaded_once(
    airflow_db, azbatch_with_storage, azurite, shared_pool, code, monkeypatch
):
    before = _staged(azurite)
    with DAG("workspace_tasks", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="single",
            pool_id=shared_pool,
            workspace=str(code),
            command="python3 workspace/hello.py && workspace/run.sh && ls -a workspace | tr '\\n' ' ' && echo",
            poll_interval=0.3,
        )
        AzureBatchJobOperator(
            task_id="fan_out",
            pool_id=shared_pool,
            workspace=Workspace(str(code)),
            command_template='echo "part {value}: $(python3 $AZBATCH_WORKSPACE/hello.py)"',
            parameters=[0, 1, 2],
            poll_interval=0.3,
        )
        AzureBatchJobOperator(
            task_id="container",
            # A pool created for a container task pre-fetches its image (checked below).
            batch_pool=BatchPool.shared("workspace-containers", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
            workspace=str(code),
            image="python:3.11-slim",
            command="cd /tmp && python3 $AZBATCH_WORKSPACE/hello.py",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert "[main] hello from the workspace" in logs
    assert "[main] run.sh ran" in logs
    assert "[main] . .. .azbatchignore .gitignore hello.py pkg run.sh " in logs
    assert sorted(line for line in logs if line.startswith("[task-")) == [
        f"[task-{i}] part {i}: hello from the workspace" for i in range(3)
    ]
    sha = pack(code, max_bytes=10_000_000).sha256
    # One archive for the three Airflow tasks and their five Batch tasks.
    assert _staged(azurite) == sorted({*before, f"workspace-{sha[:16]}.tar.gz"})
    uploads = [line for line in logs if line.startswith("Workspace ") and "uploaded to" in line]
    again = [line for line in logs if line.startswith("Workspace ") and "already staged in" in line]
    assert len(uploads) == (0 if f"workspace-{sha[:16]}.tar.gz" in before else 1)
    assert len(uploads) + len(again) == 3
    xcom = run.get_task_instance("single").xcom_pull(task_ids="single")
    assert xcom["workspaces"] == [sha]
    pool = AzureBatchHook().get_pool("workspace-containers")
    assert pool.virtual_machine_configuration.container_configuration.container_image_names == ["python:3.11-slim"]

    # Unchanged: nothing uploaded again. Edited: a new archive.
    (code / "pkg" / "greet.py").write_text("GREETING = 'edited'\n")
    with DAG("workspace_again", schedule=None, start_date=START) as again_dag:
        AzureBatchJobOperator(
            task_id="edited", pool_id=shared_pool, workspace=str(code), command="python3 workspace/hello.py"
        )
    run, logs = run_dag(again_dag)
    assert run.state == "success"
    assert "[main] edited" in logs
    assert len(_staged(azurite)) == len(before) + 2 - (1 if f"workspace-{sha[:16]}.tar.gz" in before else 0)


def test_every_node_of_a_multi_node_task_gets_it(airflow_db, azbatch_with_storage, azurite, batch_client, code):
    from tests.helpers import pool_options, wait_until

    pool_id = "workspace-mpi"
    batch_client.create_pool(pool_options(pool_id, nodes=2, slots=1, enable_inter_node_communication=True))
    wait_until(lambda: sum(1 for n in batch_client.list_nodes(pool_id) if n.state == "idle") == 2, what="2 nodes")
    with DAG("workspace_multi_node", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="mpi",
            pool_id=pool_id,
            workspace=str(code),
            num_nodes=2,
            coordination_command='echo "node has: $(python3 $AZBATCH_WORKSPACE/hello.py)"',
            command="python3 workspace/hello.py",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert "[main] node has: hello from the workspace" in logs  # the primary's coordination
    assert "[main] hello from the workspace" in logs  # the primary's command, in its working directory
    job_id = run.get_task_instance("mpi").xcom_pull(task_ids="mpi")["job_id"]
    (subtask_output,) = AzureBatchHook().subtask_outputs(job_id, "main").values()
    assert b"node has: hello from the workspace" in subtask_output  # the other node

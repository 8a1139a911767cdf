"""A TorchX role as one Batch task, and its workspace. No I/O.

A role with ``num_replicas > 1`` is a multi-instance task: the primary node runs replica 0 as the task's command,
and the coordination command starts the role on every other node in the background. Every replica runs under the
node wrapper (:mod:`.node`: which replica a node runs, its record, restarts, the time of its output) with its own
macros: ``replica_id``, ``app_id`` (the full app id, as in ``TORCHX_JOB_ID``), ``rank0_env`` =
``TORCHX_RANK0_HOST``, which holds the primary's bare address (``AZ_BATCH_MASTER_NODE`` without its port;
``localhost`` for a single replica). Commands are quoted (``shlex``) and handed to ``/bin/sh -c`` by the provider:
Batch runs no shell itself. ``env`` and ``max_retries`` (the task's retries; with ``RetryPolicy.REPLICA`` on
several replicas, each replica's restarts in place) are expressed; what Batch cannot express is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchx.specs import RetryPolicy, Role, macros

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.blob_io import OutputSpec
from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.torchx import node
from airflow_provider_azbatch.torchx.node import RANK0_ENV
from airflow_provider_azbatch.torchx.options import TorchXOptionError


def _replica_role(role: Role, app_id: str, replica: int) -> Role:
    return macros.Values(img_root="", app_id=app_id, replica_id=str(replica), rank0_env=RANK0_ENV).apply(role)


def role_task(
    role: Role,
    task_id: str,
    app_id: str,
    *,
    workspace: Workspace | None,
    containers: bool,
    single_role: bool,
    records: OutputSpec | None = None,
    run_options: str | None = None,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The role as one Batch task (a multi-instance task for several replicas); each replica runs under the
    node wrapper (:mod:`.node`). ``records``: where replica 0's record and time index are uploaded;
    ``run_options`` and ``environment``: its container's (:func:`container_setup`), the role's env winning."""
    _check_role(role, single_role)
    replicas = [_replica_role(role, app_id, index) for index in range(role.num_replicas)]
    # Variables every replica has alike go to the task; those the replica_id macro makes differ are exported.
    common = {name: value for name, value in replicas[0].env.items() if all(r.env.get(name) == value for r in replicas)}
    own = [
        ({name: value for name, value in replica.env.items() if name not in common}, replica.entrypoint, replica.args)
        for replica in replicas
    ]
    multi = role.num_replicas > 1
    # REPLICA: each replica restarts in place on its node; otherwise Batch retries the role's task.
    in_place = multi and role.retry_policy == RetryPolicy.REPLICA
    restarts = role.max_retries if in_place else 0
    shipped = workspace is not None
    if multi:
        command = node.primary_command(*own[0], workspace=shipped, restarts=restarts)
    else:
        command = node.single_node_command(*own[0], workspace=shipped, restarts=restarts)
    spec: dict[str, Any] = {
        "id": task_id,
        "command_line": command,
        "display_name": role.name,
        "environment": {**(environment or {}), **common},
        "num_nodes": role.num_replicas,
    }
    if containers and role.image:
        spec["image"] = role.image
        if run_options:
            spec["container_run_options"] = run_options
    elif role.mounts:
        raise AzureBatchValidationError(
            f"role '{role.name}' mounts", "apply to a role's container: leave containers=True (the default)"
        )
    if role.max_retries and not in_place:
        spec["max_retries"] = role.max_retries
    if workspace is not None:
        spec["workspace"] = workspace
    if records is not None:
        spec["outputs"] = [records]
    if multi:
        spec["coordination_command"] = node.coordination_command(own[1:], workspace=shipped, restarts=restarts)
    return spec


def _check_role(role: Role, single_role: bool) -> None:
    where = f"role '{role.name}'"
    if role.min_replicas is not None and role.min_replicas != role.num_replicas:
        raise AzureBatchValidationError(
            f"{where} min_replicas",
            f"is {role.min_replicas} with num_replicas={role.num_replicas}: Azure Batch runs a fixed number of "
            "replicas, not an elastic range; give one number (e.g. -j 2x1, not -j 1:2x1)",
        )
    if role.retry_policy == RetryPolicy.APPLICATION and not single_role and role.max_retries:
        raise AzureBatchValidationError(
            f"{where} retry_policy",
            "is APPLICATION (TorchX's default) with max_retries: Azure Batch cannot restart an app of several "
            "roles as a whole, only each role's task by itself; use RetryPolicy.ROLE (the role restarts on all its "
            "nodes) or RetryPolicy.REPLICA (a replica restarts on its node), or max_retries=0",
        )


def role_workspace(role: Role, ship: bool, note: Callable[[str], None], *, skip: bool = False) -> Workspace | None:
    """The provider's workspace for the role's torchx workspace: one local directory, shipped through Blob.

    ``ship``: the account can ship it (it has a storage account); if not, the app is refused, unless ``skip``
    (the user chose to run without it: a note says so before anything is submitted)."""
    workspace = role.workspace
    if not workspace:
        return None
    if not workspace.is_unmapped_single_project():
        raise AzureBatchValidationError(
            f"role '{role.name}' workspace",
            f"maps several directories ({', '.join(workspace.projects)}): the azure_batch scheduler ships one "
            "directory; give one (--workspace DIR)",
        )
    path = next(iter(workspace.projects))
    if not ship:
        if not skip:
            raise TorchXOptionError(
                "skip_workspace",
                f"is off, and role '{role.name}' has the workspace {path}, which cannot reach the nodes: the Batch "
                "account has no storage account to stage it in (give the connection storage_account_url). Run "
                "without a workspace (--workspace ''), or without this one, saying so (-cfg skip_workspace=True)",
            )
        note(
            f"Role '{role.name}' runs without its workspace {path} (skip_workspace): the Batch account has no "
            "storage account to stage it in; the role has only its image's files"
        )
        return None
    return Workspace(path)

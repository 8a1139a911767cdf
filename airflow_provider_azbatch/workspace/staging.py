"""Packing the workspaces a job's tasks use, staging each in Blob once, and handing out read-only URLs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch import config
from airflow_provider_azbatch.specs.job_side_tasks import JobSideTask
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.workspace.delivery import StagedWorkspace
from airflow_provider_azbatch.workspace.packing import PackedWorkspace, pack

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


def stage_workspaces(
    hook: AzureBatchHook,
    specs: Sequence[TaskSpec | JobSideTask],
    default: Workspace | None,
    base_dir: Path,
    lifetime: timedelta,
    log: Log,
) -> tuple[dict[str, StagedWorkspace], list[PackedWorkspace]]:
    """(staged workspace by task id, every distinct workspace packed). An archive already staged under its
    content hash is not uploaded again. Job preparation and release tasks get the job's workspace."""
    staged_by_key: dict[tuple[Any, ...], tuple[StagedWorkspace, PackedWorkspace]] = {}
    by_task: dict[str, StagedWorkspace] = {}
    for index, spec in enumerate(specs):
        workspace = spec.workspace or default
        if workspace is None:
            continue
        field = f"tasks[{index}].workspace" if spec.workspace else "workspace"
        directory = Path(workspace.path)
        if not directory.is_absolute():
            directory = base_dir / directory
        key = (
            str(directory.resolve()),
            tuple(workspace.ignore),
            workspace.max_mb,
            workspace.container,
            workspace.prefix,
        )
        if key not in staged_by_key:
            staged_by_key[key] = _stage(hook, workspace, directory, field, lifetime, log)
        by_task[spec.id] = staged_by_key[key][0]
    return by_task, [packed for _, packed in staged_by_key.values()]


def _stage(
    hook: AzureBatchHook, workspace: Workspace, directory: Path, field: str, lifetime: timedelta, log: Log
) -> tuple[StagedWorkspace, PackedWorkspace]:
    max_mb = workspace.max_mb if workspace.max_mb is not None else config.get_float("workspace_max_mb")
    packed = pack(directory, ignore=workspace.ignore, max_bytes=int(max_mb * 1_000_000), field=field)
    container = workspace.container or config.get_str("workspace_container")
    prefix = (workspace.prefix if workspace.prefix is not None else config.get_str("workspace_prefix")).strip("/")
    name = f"{prefix}/{packed.name}" if prefix else packed.name
    storage = hook.blob_storage("A workspace")
    uploaded = storage.upload_if_missing(container, name, packed.data)
    log.info(
        "Workspace %s: %d files, %.1f kB, sha256 %s (%s %s/%s)",
        directory,
        packed.files,
        packed.size / 1000,
        packed.sha256[:16],
        "uploaded to" if uploaded else "already staged in",
        container,
        name,
    )
    url = storage.blob_read_url(container, name, lifetime)
    return StagedWorkspace(packed.sha256, packed.name, url, container, name), packed

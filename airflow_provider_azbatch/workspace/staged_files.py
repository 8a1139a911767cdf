"""Small files a run hands to its tasks (a TaskFlow function's call and the script that runs it): staged in
Blob once per content, next to the workspaces, and downloaded into the task's working directory by Batch
with a read-only SAS, as workspaces are. Nothing of them travels in a command line or an environment."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_provider_azbatch import config

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook


@dataclass(frozen=True)
class FileForTasks:
    """``data`` at ``path`` (relative to the working directory) of the tasks ``task_ids`` (None: every task)."""

    path: str
    data: bytes
    task_ids: tuple[str, ...] | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def blob_name(self, prefix: str) -> str:
        stem, dot, suffix = self.path.rpartition("/")[2].partition(".")
        name = f"files/{stem}-{self.sha256[:32]}{dot}{suffix}"
        return f"{prefix}/{name}" if prefix else name


@dataclass(frozen=True)
class StagedFile:
    path: str
    url: str  # with a read-only SAS: goes into the task definitions, nowhere else
    task_ids: tuple[str, ...] | None = None
    # Where it is staged (lineage names it).
    container: str = ""
    blob: str = ""

    def for_task(self, task_id: str) -> bool:
        return self.task_ids is None or task_id in self.task_ids


def stage_files(hook: AzureBatchHook, files: Sequence[FileForTasks], lifetime: timedelta, log: Log) -> list[StagedFile]:
    """Upload each file unless a blob of its content is there already; their read-only URLs."""
    if not files:
        return []
    storage = hook.blob_storage("Files for the tasks (an @task.azure_batch call)")
    container = config.get_str("workspace_container")
    prefix = config.get_str("workspace_prefix").strip("/")
    staged = []
    for item in files:
        name = item.blob_name(prefix)
        uploaded = storage.upload_if_missing(container, name, item.data)
        log.info(
            "%s: %.1f kB, sha256 %s (%s %s/%s)",
            item.path,
            len(item.data) / 1000,
            item.sha256[:16],
            "uploaded to" if uploaded else "already staged in",
            container,
            name,
        )
        url = storage.blob_read_url(container, name, lifetime)
        staged.append(StagedFile(item.path, url, item.task_ids, container, name))
    return staged

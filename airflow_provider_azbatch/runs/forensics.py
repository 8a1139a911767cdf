"""Node forensics: a node's Batch service logs, kept before the evidence goes.

When a run fails because of its nodes (a failed start task, a node left unusable: a mount that failed, a full
disk, a lost node), what explains it is in the logs of the nodes' Batch agent, and they go with the node: when the
job's auto pool or the run's own pool is deleted, or the pool shrinks. Batch uploads them on request
(``uploadbatchservicelogs``: the SDK's ``BatchClient.upload_node_logs``) to a Blob container, through a SAS URL
the hook signs (create and write only) on the connection's storage account, into
``<[azbatch] node_logs_container>/<virtual directory Batch names>/``. The upload is done by the node's agent on its
own time; the call here waits (at most ``UPLOAD_WAIT_SECONDS``) until every file it announced is in the
container, so that nothing is deleted while it is on its way.

Nothing here fails a run: a node whose logs could not be kept says why, in the failure report.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch import config
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.hooks.storage import StorageNotConfiguredError

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.hooks.storage import BlobStorage

# Nodes whose logs one failure keeps (a pool of a hundred broken nodes tells the same story a hundred times).
MAX_NODES = 3
# How long the upload of one failure's logs may take before the run goes on (and the pool may go).
UPLOAD_WAIT_SECONDS = 120.0
# How long the container SAS given to Batch lives: the agents upload within minutes.
SAS_LIFETIME = timedelta(hours=2)
# Logs from before a node's allocation cannot exist; a node whose allocation time is unknown: the last day.
DEFAULT_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class KeptLogs:
    """Where one node's Batch service logs are (``files`` announced by Batch, ``arrived`` found there)."""

    pool_id: str
    node_id: str
    url: str | None = None
    files: int = 0
    arrived: int = 0
    problem: str | None = None

    def describe(self) -> str:
        if self.problem is not None:
            return f"Batch service logs of node {self.node_id} not kept: {self.problem}"
        where = f"Batch service logs of node {self.node_id}: {self.url} ({self.files} file(s)"
        if self.arrived < self.files:
            where += f", {self.arrived} there after {UPLOAD_WAIT_SECONDS:.0f} s: the rest may still arrive"
        return where + ")"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def keep_node_logs(
    hook: AzureBatchHook,
    pool_id: str,
    node_ids: list[str] | tuple[str, ...],
    log: Log,
    *,
    since: datetime | None = None,
    wait_seconds: float = UPLOAD_WAIT_SECONDS,
) -> list[KeptLogs]:
    """Have Batch upload the service logs of the nodes (at most ``MAX_NODES``) and wait until they are there.

    ``since``: the oldest log wanted (default: from each node's allocation). Empty when ``[azbatch]
    node_logs_container`` is empty (forensics off).
    """
    container = config.get_str("node_logs_container").strip()
    if not container or not node_ids:
        return []
    try:
        storage = hook.blob_storage("Node logs")
        storage.ensure_container(container)
        container_url = storage.write_url(container, SAS_LIFETIME)
    except StorageNotConfiguredError as exc:
        return [KeptLogs(pool_id, node_id, problem=str(exc)) for node_id in node_ids[:MAX_NODES]]
    except Exception as exc:
        problem = f"the container {container} could not be prepared ({describe_error(exc)})"
        return [KeptLogs(pool_id, node_id, problem=problem) for node_id in node_ids[:MAX_NODES]]
    pending: list[tuple[KeptLogs, str]] = []
    kept: list[KeptLogs] = []
    for node_id in node_ids[:MAX_NODES]:
        log.info("Uploading the Batch service logs of node %s (pool %s) to container %s", node_id, pool_id, container)
        try:
            start = since or _allocated(hook, pool_id, node_id)
            result = hook.upload_node_logs(pool_id, node_id, container_url, start)
        except Exception as exc:
            kept.append(KeptLogs(pool_id, node_id, problem=f"Batch refused the upload: {describe_error(exc)}"))
            continue
        directory = result.virtual_directory_name.strip("/")
        url = f"{storage.container_url(container)}/{directory}/"
        pending.append((KeptLogs(pool_id, node_id, url, result.number_of_files_uploaded or 0), directory))
    kept += _arrived(storage, container, pending, wait_seconds)
    return kept


def _allocated(hook: AzureBatchHook, pool_id: str, node_id: str) -> datetime:
    node = hook.get_node(pool_id, node_id, select=["id", "allocationTime"])
    allocated = getattr(node, "allocation_time", None) if node is not None else None
    if isinstance(allocated, datetime):
        return allocated - timedelta(minutes=1)
    return datetime.now(timezone.utc) - DEFAULT_WINDOW


def _arrived(
    storage: BlobStorage, container: str, pending: list[tuple[KeptLogs, str]], wait_seconds: float
) -> list[KeptLogs]:
    """Each upload with how many of its files are in the container, once all are or the wait is over."""
    deadline = time.monotonic() + wait_seconds
    counts = dict.fromkeys(range(len(pending)), 0)
    while True:
        for index, (kept, directory) in enumerate(pending):
            if counts[index] < kept.files:
                counts[index] = storage.count_blobs(container, f"{directory}/")
        if all(counts[index] >= kept.files for index, (kept, _) in enumerate(pending)):
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    return [
        KeptLogs(kept.pool_id, kept.node_id, kept.url, kept.files, min(counts[index], kept.files))
        for index, (kept, _) in enumerate(pending)
    ]


def report_lines(kept: list[KeptLogs]) -> list[str]:
    return [item.describe() for item in kept]

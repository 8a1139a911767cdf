"""The account's state in a file, so that a restarted service (``--state-dir``) finds its pools, jobs and tasks.

The file is JSON with an explicit schema (``SCHEMA_VERSION``); a file of another version is refused, never guessed
at. It is written whole to a temporary file that then replaces the old one, so a service killed while writing
leaves the previous state intact.

What was in flight comes back as Batch brings it back after a node restarts: a running task (or a multi-instance
task on all its nodes) is requeued — active again, ``requeueCount`` one higher, not counted as a retry; nodes that
were idle or running come back idle, nodes still being allocated, booting or leaving are given up and the pool is
resized towards its targets again; a start task or job preparation task that was running runs again; a
terminating job finishes terminating, a disabling job is disabled, a deleting job or pool is gone. Job schedules
come back with their timing and their count of jobs made (the next job's id follows on); a deleting one is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from local_azure_batch.runner.layout import NodeDirs
from local_azure_batch.runner.process import ProcessOutcome

from .account import Account
from .clock import etags_after, iso, utcnow
from .dependencies import queue
from .entity import Entity
from .job_schedules import DELETING_SCHEDULE, JobSchedule
from .jobs import ACTIVE_JOB as JOB_ACTIVE
from .jobs import DELETING, DISABLED, DISABLING, ENABLING, TERMINATING, Job
from .pools import (
    DEALLOCATED,
    IDLE,
    OFFLINE,
    POOL_DELETING,
    START_TASK_FAILED,
    STEADY,
    UNUSABLE,
    ComputeNode,
    Pool,
)
from .pools import RUNNING as NODE_RUNNING
from .task_instances import TaskInstance
from .tasks import ACTIVE, PREPARING, RUNNING, RecentRun, Task

SCHEMA_VERSION = 1
STATE_FILE = "batch-state.json"
_FORMAT = "local-azure-batch state"

# Nodes in these states come back (idle if they were busy); the others were on their way in or out.
_KEPT_NODE_STATES = (IDLE, NODE_RUNNING, START_TASK_FAILED, UNUSABLE, OFFLINE, DEALLOCATED)


# Per node id: the node and its saved recentTasks entries, linked to tasks once the jobs are back.
_PendingRecent = dict[str, tuple[ComputeNode, list[dict[str, Any]]]]


class StateFileError(Exception):
    """A state file this service cannot load; the message says which file and what to do."""


# -- writing ------------------------------------------------------------------------------------------
def snapshot(account: Account) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "schemaVersion": SCHEMA_VERSION,
        "accountName": account.settings.account_name,
        "baseUrl": account.base_url,
        "pools": [_pool(pool) for pool in account.pools.values() if pool.state != POOL_DELETING],
        "jobs": [_job(job) for job in account.jobs.values() if job.state != DELETING],
        "jobSchedules": [_schedule(item) for item in account.job_schedules.values() if item.state != DELETING_SCHEDULE],
    }


def encode(account: Account) -> str:
    return json.dumps(snapshot(account), indent=1, sort_keys=True)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: a temporary file beside it, flushed, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def remove_leftovers(path: Path) -> None:
    """Temporary files a service killed while saving left beside ``path``."""
    for leftover in path.parent.glob(f".{path.name}.*"):
        leftover.unlink(missing_ok=True)


def _entity(entity: Entity) -> dict[str, Any]:
    return {
        "spec": entity.spec,
        "creationTime": iso(entity.creation_time),
        "lastModified": iso(entity.last_modified),
        "eTag": entity.etag,
        "state": entity.state,
        "stateTime": iso(entity.state_time),
        "previousState": entity.previous_state,
        "previousStateTime": _iso(entity.previous_state_time),
    }


def _pool(pool: Pool) -> dict[str, Any]:
    return {
        **_entity(pool),
        "ownerJob": pool.owner_job,
        "allocationState": pool.allocation_state,
        "allocationTime": iso(pool.allocation_time),
        "nodeCounter": pool.node_counter,
        "resizeErrors": pool.resize_errors,
        "autoScaleRun": pool.auto_scale_run,
        "deallocationOption": pool.deallocation_option,
        "nodes": [_node(node) for node in pool.nodes.values()],
    }


def _node(node: ComputeNode) -> dict[str, Any]:
    recent: list[dict[str, Any]] = []
    for entry in node.recent:
        if isinstance(entry, RecentRun):
            recent.append({"job": entry.task.job.id, "task": entry.task.id, "attempt": entry.attempt})
        else:
            recent.append({"job": entry.task.job.id, "task": entry.task.id, "subtask": entry.id})
    return {
        "id": node.id,
        "index": node.index,
        "dedicated": node.is_dedicated,
        "state": node.state,
        "stateTime": iso(node.state_time),
        "allocationTime": iso(node.allocation_time),
        "lastBootTime": _iso(node.last_boot_time),
        "ipAddress": node.ip_address,
        "leaving": node.leaving,
        "totalRun": node.total_run,
        "totalSucceeded": node.total_succeeded,
        "startTaskInfo": node.start_task_info,
        "errors": node.errors,
        "schedulingState": node.scheduling_state,
        "users": list(node.users.values()),
        "recent": recent,
    }


def _job(job: Job) -> dict[str, Any]:
    return {
        **_entity(job),
        "execution": job.execution,
        "autoPool": job.auto_pool.id if job.auto_pool is not None else None,
        "scheduleId": job.schedule_id,
        "preparation": job.preparation,
        "release": job.release,
        "tasks": [_task(task) for task in job.tasks.values()],
    }


def _schedule(schedule: JobSchedule) -> dict[str, Any]:
    return {
        **_entity(schedule),
        "nextRun": _iso(schedule.next_run),
        "lastRun": _iso(schedule.last_run),
        "recentJob": schedule.recent_job,
        "jobCount": schedule.job_count,
        "endTime": _iso(schedule.end_time),
    }


def _task(task: Task) -> dict[str, Any]:
    return {
        **_entity(task),
        "execution": task.execution,
        "nodeInfo": task.node_info,
        "node": [task.node.pool.id, task.node.id] if task.node is not None else None,
        "attempt": task.attempt,
        "pastAttempts": {str(number): info for number, info in task.past_attempts.items()},
        "instances": [_instance(instance) for instance in task.instances],
    }


def _instance(instance: TaskInstance) -> dict[str, Any]:
    outcome = instance.outcome
    return {
        "id": instance.id,
        "node": [instance.node.pool.id, instance.node.id],
        "state": instance.state,
        "stateTime": iso(instance.state_time),
        "previousState": instance.previous_state,
        "previousStateTime": _iso(instance.previous_state_time),
        "startTime": iso(instance.start_time),
        "endTime": _iso(instance.end_time),
        "outcome": None
        if outcome is None
        else {
            "exitCode": outcome.exit_code,
            "endedBy": outcome.ended_by,
            "startTime": iso(outcome.start_time),
            "endTime": iso(outcome.end_time),
            "error": outcome.error,
        },
        "failureInfo": instance.failure_info,
    }


# -- reading ------------------------------------------------------------------------------------------
def read(path: Path) -> dict[str, Any] | None:
    """The saved state, or None when there is none yet; a file of another schema is refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StateFileError(
            f"{path} is not a state file of the local Batch service ({exc}): move it away, or give another --state-dir"
        ) from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise StateFileError(
            f"{path} is not a state file of the local Batch service: move it away, or give another --state-dir"
        )
    version = data.get("schemaVersion")
    if version != SCHEMA_VERSION:
        raise StateFileError(
            f"{path} has state schema version {version!r}; this local Batch service reads version "
            f"{SCHEMA_VERSION} only. Start the version that wrote it, or move the file away to start empty."
        )
    return data


class Restored:
    """What the service has to set going again after a restore: pools short of their targets, jobs that
    were terminating, start tasks that were running."""

    def __init__(self) -> None:
        self.pools_to_resize: list[Pool] = []
        self.jobs_to_terminate: list[Job] = []
        # Nodes whose start task (without waitForSuccess) was still running: it runs again, as after a reboot.
        self.start_tasks_to_rerun: list[ComputeNode] = []


def restore(account: Account, data: dict[str, Any], path: Path) -> Restored:
    """Rebuild the account's pools, jobs and tasks from ``data``, read from ``path`` by :func:`read`."""
    try:
        return _restore(account, data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        account.pools.clear()
        account.jobs.clear()
        account.job_schedules.clear()
        raise StateFileError(
            f"{path} has schema version {SCHEMA_VERSION} but cannot be loaded ({type(exc).__name__}: {exc}): it was "
            "changed by hand or damaged; move it away to start empty"
        ) from None


def _restore(account: Account, data: dict[str, Any]) -> Restored:
    restored = Restored()
    old_url, new_url = str(data.get("baseUrl") or ""), account.base_url
    task_root = account.settings.task_root
    recent: _PendingRecent = {}
    for item in data["pools"]:
        pool = _restore_pool(item, task_root, recent)
        account.pools[pool.key] = pool
        restored.start_tasks_to_rerun += [
            node for node in pool.nodes.values() if (node.start_task_info or {}).get("state") == "running"
        ]
        if (len(pool.members(True)), len(pool.members(False))) != (pool.target_dedicated, pool.target_low_priority):
            restored.pools_to_resize.append(pool)
    for item in data["jobs"]:
        job = _restore_job(account, item, old_url, new_url)
        account.jobs[job.key] = job
        if job.state == TERMINATING:
            restored.jobs_to_terminate.append(job)
    # Absent from files written before job schedules were kept: none then.
    for item in data.get("jobSchedules", []):
        schedule = _restore_schedule(item)
        account.job_schedules[schedule.key] = schedule
    _link_recent(account, recent)
    # New nodes get addresses after the restored ones, so no two nodes share one.
    account.node_addresses.resume_after(
        node.ip_address for pool in account.pools.values() for node in pool.nodes.values()
    )
    etags_after(
        [pool.etag for pool in account.pools.values()]
        + [job.etag for job in account.jobs.values()]
        + [task.etag for job in account.jobs.values() for task in job.tasks.values()]
        + [schedule.etag for schedule in account.job_schedules.values()]
    )
    # Node directories of pools that did not come back (deleting when the service stopped) are not kept.
    pools_dir = task_root / "pools"
    if pools_dir.is_dir():
        for path in pools_dir.iterdir():
            if path.name.lower() not in account.pools:
                shutil.rmtree(path, ignore_errors=True)
    return restored


def _restore_entity(entity: Entity, item: dict[str, Any]) -> None:
    entity.creation_time = _time(item["creationTime"])
    entity.last_modified = _time(item["lastModified"])
    entity.etag = item["eTag"]
    entity.state = item["state"]
    entity.state_time = _time(item["stateTime"])
    entity.previous_state = item["previousState"]
    entity.previous_state_time = _optional_time(item["previousStateTime"])


def _restore_pool(item: dict[str, Any], task_root: Path, recent: _PendingRecent) -> Pool:
    pool = Pool(item["spec"], owner_job=item["ownerJob"])
    _restore_entity(pool, item)
    pool.allocation_state = item["allocationState"]
    pool.allocation_time = _time(item["allocationTime"])
    pool.node_counter = item["nodeCounter"]
    pool.resize_errors = item["resizeErrors"]
    pool.auto_scale_run = item["autoScaleRun"]
    pool.deallocation_option = item["deallocationOption"]
    if pool.spec.get("enableAutoScale"):
        pool.next_autoscale = utcnow()  # evaluated at the first tick, after a fresh sample
    for saved in item["nodes"]:
        node = ComputeNode(pool, saved["index"], saved["dedicated"], task_root, saved["ipAddress"])
        node.id = saved["id"]
        node.dirs = NodeDirs.for_node(task_root, pool.id, node.id)
        if saved["state"] not in _KEPT_NODE_STATES or saved["leaving"]:
            node.dirs.remove()
            continue
        node.state = IDLE if saved["state"] == NODE_RUNNING else saved["state"]
        node.state_time = utcnow() if saved["state"] == NODE_RUNNING else _time(saved["stateTime"])
        node.allocation_time = _time(saved["allocationTime"])
        node.last_boot_time = _optional_time(saved["lastBootTime"])
        node.total_run = saved["totalRun"]
        node.total_succeeded = saved["totalSucceeded"]
        node.start_task_info = saved["startTaskInfo"]
        node.errors = saved["errors"]
        node.scheduling_state = saved.get("schedulingState", node.scheduling_state)
        if node.state == IDLE:
            node.state = node.ready_state
        node.users = {user["name"].lower(): user for user in saved.get("users", [])}
        node.dirs.create()
        pool.nodes[node.id] = node
        # Recent tasks are linked once the jobs are back (see _link_recent).
        recent[node.id] = (node, saved["recent"])
    pool.allocation_state = STEADY
    return pool


def _restore_job(account: Account, item: dict[str, Any], old_url: str, new_url: str) -> Job:
    job = Job(item["spec"])
    _restore_entity(job, item)
    job.constraints_changed()
    job.execution = item["execution"]
    job.schedule_id = item.get("scheduleId")
    if item["autoPool"] is not None:
        job.auto_pool = account.pools.get(item["autoPool"].lower())
        if job.auto_pool is None:  # its pool was being deleted: the job still names it
            job.auto_pool = Pool(
                {**job.spec["poolInfo"]["autoPoolSpecification"]["pool"], "id": item["autoPool"]}, owner_job=job.id
            )
    # A preparation task that was running when the service stopped runs again on that node.
    job.preparation = {node: record for node, record in item["preparation"].items() if record.get("state") != "running"}
    job.release = item["release"]
    if job.state == DISABLING:
        job.set_state(DISABLED)
    elif job.state == ENABLING:
        job.set_state(JOB_ACTIVE)
    tasks = [_restore_task(account, job, saved, old_url, new_url) for saved in item["tasks"]]
    for task in tasks:
        job.add_task(task)
    for task in sorted(tasks, key=lambda task: task.creation_time):
        if task.state == ACTIVE:
            queue(job, task)
    return job


def _restore_schedule(item: dict[str, Any]) -> JobSchedule:
    """A schedule as it was; the intervals it missed while the service was down are worked out at the next tick
    (each waits only for its start window, as while it ran)."""
    schedule = JobSchedule(item["spec"])
    _restore_entity(schedule, item)
    schedule.next_run = _optional_time(item["nextRun"])
    schedule.last_run = _optional_time(item["lastRun"])
    schedule.recent_job = item["recentJob"]
    schedule.job_count = item["jobCount"]
    schedule.end_time = _optional_time(item["endTime"])
    return schedule


def _restore_task(account: Account, job: Job, item: dict[str, Any], old_url: str, new_url: str) -> Task:
    task = Task(item["spec"], job)
    _restore_entity(task, item)
    task.execution = item["execution"]
    task.node_info = _rebase(item["nodeInfo"], old_url, new_url)
    task.attempt = item["attempt"]
    task.past_attempts = {int(number): info for number, info in item["pastAttempts"].items()}
    if item["node"] is not None:
        task.node = _find_node(account, item["node"])
        if task.node is not None:
            task.directory = task.node.dirs.task_dir(job.id, task.id)
    if task.state in (RUNNING, PREPARING):
        # Its node restarted under it: requeued, as Batch requeues the running tasks of a node that restarts.
        task.requeue()
        task.set_state(ACTIVE)
        return task
    for saved in item["instances"]:
        node = _find_node(account, saved["node"])
        if node is None:
            continue
        instance = TaskInstance(task, saved["id"], node, account.base_url)
        instance.state = saved["state"]
        instance.state_time = _time(saved["stateTime"])
        instance.previous_state = saved["previousState"]
        instance.previous_state_time = _optional_time(saved["previousStateTime"])
        instance.start_time = _time(saved["startTime"])
        instance.end_time = _optional_time(saved["endTime"])
        outcome = saved["outcome"]
        if outcome is not None:
            instance.outcome = ProcessOutcome(
                exit_code=outcome["exitCode"],
                ended_by=outcome["endedBy"],
                start_time=_time(outcome["startTime"]),
                end_time=_time(outcome["endTime"]),
                error=outcome["error"],
            )
        instance.failure_info = saved["failureInfo"]
        task.instances.append(instance)
    return task


def _link_recent(account: Account, recent: _PendingRecent) -> None:
    """Nodes' recentTasks entries, in the order the nodes had them, once the tasks are back."""
    for node, pending in recent.values():
        for entry in pending:
            job = account.jobs.get(entry["job"].lower())
            task = job.tasks.get(entry["task"].lower()) if job is not None else None
            if task is None:
                continue
            if "subtask" in entry:
                instance = next((item for item in task.instances if item.id == entry["subtask"]), None)
                if instance is not None:
                    node.recent.append(instance)
            else:
                run = RecentRun(task)
                run.attempt = entry["attempt"]
                node.recent.append(run)


def _find_node(account: Account, where: list[str]) -> ComputeNode | None:
    pool = account.pools.get(where[0].lower())
    return pool.nodes.get(where[1]) if pool is not None else None


def _rebase(info: dict[str, Any] | None, old_url: str, new_url: str) -> dict[str, Any] | None:
    """URLs in nodeInfo name the service's address, which may change across a restart."""
    if info is None or not old_url or old_url == new_url:
        return info
    return {
        key: new_url + value[len(old_url) :] if isinstance(value, str) and value.startswith(old_url) else value
        for key, value in info.items()
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _optional_time(text: str | None) -> datetime | None:
    return None if text is None else _time(text)

"""Reading an app from Batch: its jobs, each role's task and subtasks, and each replica's record.

One read of the app is a job read, one task listing and one subtask listing per role with several replicas;
``records=True`` adds a read of each replica's record (``describe``). The ``logs`` follower keeps one
:class:`AppReader` and reads records only to learn which subtask runs which replica.

TorchX reads these itself, beside the watch: a replica other than 0 is a subtask of a multi-instance task, and its
state, exit code and restarts are in its own record on its node (:mod:`.node`), neither of which the watch reads
(it follows a job's tasks by their counts and files). What the watch does read, the files of a task and its
uploaded logs, is read through the same read primitives of the hook (:mod:`.files`).
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import TYPE_CHECKING

from torchx.specs import AppState

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.torchx.app import (
    App,
    Job,
    Replica,
    Role,
    carrier_of,
    combined,
    counts_of,
    job_of,
    why_gone,
)
from airflow_provider_azbatch.torchx.files import BlobFiles, Files, NodeFiles, TaskFiles, read_whole
from airflow_provider_azbatch.torchx.names import other_jobs_of, role_jobs_of
from airflow_provider_azbatch.torchx.node import REPLICAS_DIR, STATUS_FILE
from airflow_provider_azbatch.torchx.records import Record
from airflow_provider_azbatch.torchx.states import Carrier, app_state, replica_state, with_replicas

if TYPE_CHECKING:
    from azure.batch.models import BatchJob, BatchTask

    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

JOB_SELECT = ["id", "state", "executionInfo", "metadata", "poolInfo"]
TASK_SELECT = ["id", "state", "executionInfo", "nodeInfo", "containerSettings", "multiInstanceSettings"]


class AppReader:
    """Reads one app (its Batch job) on one account; remembers which subtask runs which replica."""

    def __init__(self, hook: AzureBatchHook, job_id: str, *, has_storage: bool) -> None:
        self.hook = hook
        self.job_id = job_id
        self.has_storage = has_storage
        # (task id, subtask id) -> replica, learnt from the subtask's record.
        self._subtask_replica: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def read(self, *, records: bool) -> App | None:
        """The app, None once its job is gone (also when it was deleted while being read)."""
        from azure.core.exceptions import ResourceNotFoundError

        job = self.hook.get_job(self.job_id, select=JOB_SELECT)
        if job is None:
            return None
        try:
            return self._read(job, records=records)
        except ResourceNotFoundError:
            if self.hook.get_job(self.job_id, select=["id"]) is None:
                return None
            raise

    def _read(self, job: BatchJob, *, records: bool) -> App:
        metadata = {item.name: item.value for item in job.metadata or [] if item.name}
        own = job_of(self.job_id, job)
        tasks = self._tasks(self.job_id)
        app = App(
            job_id=self.job_id,
            job_state=own.state,
            terminate_reason=own.terminate_reason,
            metadata=metadata,
            roles=[],
            state=AppState.UNKNOWN,
            location=LogLocation.from_metadata(job.metadata),
            pool_id=own.pool_id,
            auto_pool=own.auto_pool,
            jobs={self.job_id: own},
        )
        states = [app_state(own.state, own.terminate_reason, counts_of(tasks.values()))]
        tasks_of = {self.job_id: tasks, **self._other_jobs(app, states)}
        for index, (name, task_id, replicas, entrypoint, job_id) in enumerate(role_jobs_of(metadata)):
            job_id = job_id if job_id in tasks_of else self.job_id
            task = tasks_of[job_id].get(task_id)
            image = getattr(getattr(task, "container_settings", None), "image_name", None) or ""
            role = Role(name, index, task_id, replicas, entrypoint, image, job_id=job_id)
            role.replicas = self._role_replicas(app, role, task, records=records)
            app.roles.append(role)
        if app.terminate_reason in (None, "AllTasksComplete"):
            # The app ended by another job's end (a role failed there, or it was stopped): that job's reason.
            reasons = (job.terminate_reason for job in app.jobs.values())
            app.terminate_reason = next((r for r in reasons if r not in (None, "AllTasksComplete")), None) or (
                app.terminate_reason
            )
        app.state = with_replicas(combined(states), (r.state for r in app.replicas()))
        return app

    def _tasks(self, job_id: str) -> dict[str, BatchTask]:
        return {task.id: task for task in self.hook.list_tasks(job_id, select=TASK_SELECT) if task.id}

    def _other_jobs(self, app: App, states: list[AppState]) -> dict[str, dict[str, BatchTask]]:
        """The tasks of the app's other jobs (roles on pools of other VM sizes), by job; each job read into the app,
        its state into ``states``. One deleted before the app's own reads as gone."""
        tasks_of: dict[str, dict[str, BatchTask]] = {}
        for other_id in other_jobs_of(app.metadata):
            other = self.hook.get_job(other_id, select=JOB_SELECT)
            if other is None:
                app.jobs[other_id] = Job(other_id, "completed", None, None, True)
                tasks_of[other_id] = {}
                continue
            read = app.jobs[other_id] = job_of(other_id, other)
            tasks_of[other_id] = self._tasks(other_id)
            states.append(app_state(read.state, read.terminate_reason, counts_of(tasks_of[other_id].values())))
        return tasks_of

    # -- one role --------------------------------------------------------------------------------------------
    def _role_replicas(self, app: App, role: Role, task: BatchTask | None, *, records: bool) -> list[Replica]:
        replicas = [Replica(role.name, role.index, role.task_id, k, role.job_id) for k in range(role.num_replicas)]
        if task is None:
            for replica in replicas:
                self._fill(app, replica, Carrier(), None, retries=0, read_record=records)
            return replicas
        info = task.execution_info
        retries = int(getattr(info, "retry_count", 0) or 0)
        task_state = enum_value(task.state) if task.state is not None else None
        node = task.node_info
        on_node = node is not None and bool(node.task_root_directory)
        self._fill(
            app,
            replicas[0],
            carrier_of(task_state, info),
            TaskFiles(self.hook, role.job_id, task.id) if on_node else None,
            node_id=getattr(node, "node_id", None) or "",
            start=getattr(info, "start_time", None),
            end=getattr(info, "end_time", None),
            retries=retries,
            read_record=records,
        )
        seen = {0}
        if role.num_replicas > 1 and task_state in ("running", "completed"):
            seen |= self._fill_subtasks(app, role, task, replicas, retries, records=records)
        for replica in replicas:
            if replica.index not in seen:
                # On no node (yet, or any more): what was kept, once it has ended.
                self._fill(app, replica, Carrier(task_state), None, retries=retries, read_record=records)
        return replicas

    def _fill_subtasks(
        self, app: App, role: Role, task: BatchTask, replicas: list[Replica], retries: int, *, records: bool
    ) -> set[int]:
        """The replicas on the task's other nodes; which ones were found there."""
        found: set[int] = set()
        for subtask in self.hook.list_subtasks(role.job_id, task.id):
            node = subtask.node_info
            if not subtask.id or node is None or not node.task_root_directory:
                continue
            state = enum_value(subtask.state) if subtask.state is not None else None
            done = state == "completed" or app.ended
            on_node = NodeFiles(self.hook, node.pool_id or "", node.node_id or "", node.task_root_directory)
            files: Files | None = on_node
            key = (task.id, int(subtask.id))
            with self._lock:
                known = self._subtask_replica.get(key)
            record = None
            if known is None or records:
                text = read_whole(on_node, STATUS_FILE)
                if text is None and done:
                    files = None  # its node is gone
                record = Record.parse(text) if text else None
                if record is not None:
                    known = record.replica
                elif known is None and role.num_replicas == 2:
                    known = 1  # the one other node
                elif known is None and done:
                    known = int(subtask.id)  # its record is gone: its number is the best guess
                if known is None:
                    continue  # its replica has not said which it is yet
                if record is not None or done:
                    with self._lock:
                        self._subtask_replica[key] = known
            if not 0 < known < len(replicas):
                continue
            found.add(known)
            self._fill(
                app,
                replicas[known],
                Carrier(
                    state,
                    enum_value(subtask.result) if subtask.result is not None else None,
                    subtask.exit_code,
                    getattr(subtask.failure_info, "code", None),
                ),
                files,
                node_id=node.node_id or "",
                start=subtask.start_time,
                end=subtask.end_time,
                retries=retries,
                record=record,
                # Read on the node above already: what was kept, when the node is gone.
                read_record=records and record is None and files is None,
            )
        return found

    def _fill(
        self,
        app: App,
        replica: Replica,
        carrier: Carrier,
        files: Files | None,
        *,
        node_id: str = "",
        start: datetime | None = None,
        end: datetime | None = None,
        retries: int,
        record: Record | None = None,
        read_record: bool,
    ) -> None:
        done = carrier.state == "completed" or app.ended
        replica.kept = self._kept(app, replica)
        if read_record and record is None and files is not None:
            text = read_whole(files, STATUS_FILE)
            if text is None and done:
                files = None  # its node is gone (or it never ran)
            record = Record.parse(text) if text else None
        if files is None and done and replica.kept is not None:
            files = replica.kept
            if read_record and record is None:
                text = read_whole(files, STATUS_FILE)
                record = Record.parse(text) if text else None
        replica.record = record
        replica.files = files
        replica.node_id = node_id
        replica.done = done
        replica.state = replica_state(replica.index, carrier, record, job_ended=app.ended, cancelled=app.cancelled)
        own = record if record is not None and record.ended_itself else None
        if own is not None:
            replica.exit_code = own.exit_code
        elif replica.index == 0 or carrier.result == "failure":
            # Replica 0's exit code is its task's; another's subtask's is its coordination command's, which
            # counts only when it failed (the replica never started).
            replica.exit_code = carrier.exit_code
        replica.restarts = retries + (record.restarts if record is not None else 0)
        replica.host = record.host if record is not None else ""
        replica.started = start
        replica.ended = (own.end_time if own is not None else None) or (end if carrier.state == "completed" else None)
        replica.failure = carrier.failure_code
        replica.why_gone = why_gone(app, replica, has_storage=self.has_storage) if done else None

    # -- kept output -----------------------------------------------------------------------------------------
    def _kept(self, app: App, replica: Replica) -> BlobFiles | None:
        if app.location is None or not self.has_storage:
            return None
        below = f"{REPLICAS_DIR}/{replica.index}" if replica.index > 0 else ""
        return BlobFiles(self.hook, app.location, replica.job_id or app.job_id, replica.task_id, below)

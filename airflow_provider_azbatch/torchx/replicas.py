"""Each replica of an app as its own: state, exit code, restarts, node, and where its files are now.

Replica 0 of a role is its Batch task (a multi-instance task's primary): its files are the task's, on its node
while the node is there, then in the log container (uploaded with the task's output files). Replica ``k > 0``
runs on the node of one of the task's subtasks: which one, its own record says (:mod:`.node`); its files are in
that subtask's directory on the node, then in the log container under ``replicas/<k>/`` (uploaded by the job
release task when the job ended).

One read of the app is a job read, one task listing and one subtask listing per role with several replicas;
``records=True`` adds a read of each replica's record (``describe``). The ``logs`` follower keeps one
:class:`AppReader` and reads records only to learn which subtask runs which replica.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from torchx.specs import AppState

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.model.records import TaskCounts
from airflow_provider_azbatch.torchx.names import other_jobs_of, role_jobs_of
from airflow_provider_azbatch.torchx.node import REPLICAS_DIR, STATUS_FILE
from airflow_provider_azbatch.torchx.records import Record
from airflow_provider_azbatch.torchx.states import (
    CANCEL_REASONS,
    ENDED_JOB_STATES,
    Carrier,
    app_state,
    replica_state,
    with_replicas,
)

if TYPE_CHECKING:
    from azure.batch.models import BatchTask

    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

JOB_SELECT = ["id", "state", "executionInfo", "metadata", "poolInfo"]
TASK_SELECT = ["id", "state", "executionInfo", "nodeInfo", "containerSettings", "multiInstanceSettings"]
# A record is a few hundred bytes.
RECORD_BYTES = 4096


# -- where a replica's files are -----------------------------------------------------------------------------
def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)


# The SDK logs a warning with a traceback ("Ran into a deserialization error") for every file it does not find
# (its failsafe read of the error body of a streamed or bodiless answer); a replica's file not there (yet, or any
# more) is an answer here, so the warning is dropped while these reads run, in their thread only.
_SDK_MODEL_LOGGER = "azure.batch._utils.model_base"
_reading = threading.local()


class _ExpectedMisses(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_reading, "active", False)


logging.getLogger(_SDK_MODEL_LOGGER).addFilter(_ExpectedMisses())


@contextlib.contextmanager
def _expecting_misses() -> Iterator[None]:
    _reading.active = True
    try:
        yield
    finally:
        _reading.active = False


class Files:
    """A directory of a replica's files: ``read(name, start, end)`` is bytes ``start..end`` (inclusive, fewer
    at the end of the file; empty past it), or None when the file (or its node, or its blob) is not there."""

    kind = "node"

    def read(self, name: str, start: int, end: int) -> bytes | None:
        from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

        try:
            with _expecting_misses():
                return self._read(name, start, end)
        except ResourceNotFoundError:
            return None
        except HttpResponseError as exc:
            if _status(exc) == 416:  # nothing at or past start (yet)
                return b""
            if _status(exc) == 409:  # a node that cannot answer for its files any more (being removed)
                return None
            raise

    def size(self, name: str) -> int | None:
        """The file's size; None when it is not there."""
        from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

        try:
            with _expecting_misses():
                return self._size(name)
        except ResourceNotFoundError:
            return None
        except HttpResponseError as exc:
            if _status(exc) == 409:
                return None
            raise

    def _read(self, name: str, start: int, end: int) -> bytes:
        raise NotImplementedError

    def _size(self, name: str) -> int:
        raise NotImplementedError


@dataclass
class TaskFiles(Files):
    """Replica 0's: the task's own files (on its node)."""

    hook: AzureBatchHook
    job_id: str
    task_id: str

    def _read(self, name: str, start: int, end: int) -> bytes:
        data = self.hook.client.download_task_file(self.job_id, self.task_id, name, ocp_range=f"bytes={start}-{end}")
        return b"".join(data)

    def _size(self, name: str) -> int:
        return int(self.hook.client.get_task_file_properties(self.job_id, self.task_id, name).content_length or 0)


@dataclass
class NodeFiles(Files):
    """Another replica's: its subtask's directory on its node."""

    hook: AzureBatchHook
    pool_id: str
    node_id: str
    directory: str

    def _read(self, name: str, start: int, end: int) -> bytes:
        data = self.hook.client.download_node_file(
            self.pool_id, self.node_id, self._path(name), ocp_range=f"bytes={start}-{end}"
        )
        return b"".join(data)

    def _size(self, name: str) -> int:
        properties = self.hook.client.get_node_file_properties(self.pool_id, self.node_id, self._path(name))
        return int(properties.content_length or 0)

    def _path(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}"


@dataclass
class BlobFiles(Files):
    """What was kept in the log container once the node is gone."""

    hook: AzureBatchHook
    container: str
    directory: str
    kind = "blob"

    def _read(self, name: str, start: int, end: int) -> bytes:
        storage = self.hook.blob_storage("Kept TorchX output")
        with storage.service_client() as service:
            blob = service.get_blob_client(self.container, f"{self.directory}/{name}")
            return bytes(blob.download_blob(offset=start, length=end - start + 1).readall())

    def _size(self, name: str) -> int:
        size = self.hook.blob_storage("Kept TorchX output").blob_size(self.container, f"{self.directory}/{name}")
        if size is None:
            from azure.core.exceptions import ResourceNotFoundError

            raise ResourceNotFoundError(f"{self.directory}/{name}")
        return size


def read_whole(files: Files, name: str, limit: int = RECORD_BYTES) -> str | None:
    data = files.read(name, 0, limit - 1)
    return None if data is None else data.decode("utf-8", errors="replace")


def last_lines(files: Files | None, name: str, count: int, max_bytes: int = 256 * 1024) -> list[str]:
    """The last ``count`` lines of a file (none when it cannot be read)."""
    size = files.size(name) if files is not None else None
    if files is None or not size:
        return []
    data = files.read(name, max(0, size - max_bytes), size - 1) or b""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-count:]


# -- the app as its replicas ---------------------------------------------------------------------------------
@dataclass
class Replica:
    role: str
    role_index: int
    task_id: str
    index: int
    job_id: str = ""  # the Batch job its role's task is in
    state: AppState = AppState.UNKNOWN
    exit_code: int | None = None
    restarts: int = 0
    node_id: str = ""
    host: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    record: Record | None = None
    # Where its files are now (None: nowhere yet, or gone), and where they are kept once its node is gone;
    # whether it has ended (its files grow no more).
    files: Files | None = None
    kept: Files | None = None
    done: bool = False
    # Why its files are gone, when they cannot be read once it has ended.
    why_gone: str | None = None
    failure: str | None = None  # Batch's failure code and message, when Batch failed it


@dataclass
class Role:
    name: str
    index: int
    task_id: str
    num_replicas: int
    entrypoint: str
    image: str = ""
    replicas: list[Replica] = field(default_factory=list)
    job_id: str = ""  # the Batch job its task is in (the app's, or another pool's)


@dataclass
class Job:
    """One of the app's Batch jobs as read: the app's own, or one of its other pools' (roles of another size)."""

    job_id: str
    state: str | None
    terminate_reason: str | None
    pool_id: str | None
    auto_pool: bool

    @property
    def ended(self) -> bool:
        return self.state in ENDED_JOB_STATES


@dataclass
class App:
    job_id: str
    job_state: str | None
    terminate_reason: str | None
    metadata: dict[str, str]
    roles: list[Role]
    state: AppState
    location: LogLocation | None
    pool_id: str | None
    auto_pool: bool
    # The app's jobs by id, its own first; more than one when its roles run on pools of different VM sizes.
    jobs: dict[str, Job] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        if self.jobs:
            return all(job.ended for job in self.jobs.values())
        return self.job_state in ENDED_JOB_STATES

    @property
    def cancelled(self) -> bool:
        return self.terminate_reason in CANCEL_REASONS or any(
            job.terminate_reason in CANCEL_REASONS for job in self.jobs.values()
        )

    def replicas(self) -> Iterator[Replica]:
        for role in self.roles:
            yield from role.replicas

    def replica(self, role_name: str, k: int) -> Replica | None:
        role = next((role for role in self.roles if role.name == role_name), None)
        return role.replicas[k] if role is not None and 0 <= k < len(role.replicas) else None


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

    def _read(self, job: Any, *, records: bool) -> App:
        hook = self.hook
        metadata = {item.name: item.value for item in job.metadata or [] if item.name}
        own = _job(self.job_id, job)
        tasks = {task.id: task for task in hook.list_tasks(self.job_id, select=TASK_SELECT)}
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
        states = [app_state(own.state, own.terminate_reason, _counts(tasks.values()))]
        # The app's other jobs (roles on pools of other VM sizes); one deleted before the app's own reads as gone.
        tasks_of = {self.job_id: tasks}
        for other_id in other_jobs_of(metadata):
            other = hook.get_job(other_id, select=JOB_SELECT)
            if other is None:
                app.jobs[other_id] = Job(other_id, "completed", None, None, True)
                tasks_of[other_id] = {}
                continue
            app.jobs[other_id] = _job(other_id, other)
            tasks_of[other_id] = {task.id: task for task in hook.list_tasks(other_id, select=TASK_SELECT)}
            read = app.jobs[other_id]
            states.append(app_state(read.state, read.terminate_reason, _counts(tasks_of[other_id].values())))
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
        app.state = with_replicas(_combined(states), (r.state for r in app.replicas()))
        return app

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
            _carrier(task_state, info),
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
        replica.why_gone = self._why_gone(app, replica) if done else None

    # -- kept output -----------------------------------------------------------------------------------------
    def _kept(self, app: App, replica: Replica) -> BlobFiles | None:
        if app.location is None or not self.has_storage:
            return None
        directory = app.location.path(replica.job_id or app.job_id, replica.task_id)
        if replica.index > 0:
            directory = f"{directory}/{REPLICAS_DIR}/{replica.index}"
        return BlobFiles(self.hook, app.location.container, directory)

    def _why_gone(self, app: App, replica: Replica) -> str:
        """Why a replica's output cannot be read, if it cannot: where it was, and why nothing was kept."""
        who = f"The output of role '{replica.role}' replica {replica.index}"
        job = app.jobs.get(replica.job_id)
        pool_id, auto_pool = (job.pool_id, job.auto_pool) if job is not None else (app.pool_id, app.auto_pool)
        if auto_pool:
            where = f"its node went with the pool made for the app ({pool_id}), which Batch deletes with the job"
        else:
            where = f"its node in pool {pool_id} no longer has it (removed, or the task's files cleaned up)"
        if app.location is not None and not self.has_storage:
            kept = (
                f"and it was kept in Blob container {app.location.container}, but this account's connection has no "
                "storage account to read it with (storage_account_url)"
            )
        elif app.location is not None:
            uploader = (
                "Batch uploads replica 0's when its task ends"
                if replica.index == 0
                else "the job release task uploads the other replicas' when the job ends"
            )
            kept = f"and it is not in Blob container {app.location.container}, where it was to be kept ({uploader})"
        elif self.has_storage:
            kept = "and it was not kept: the app ran with log_container empty"
        else:
            kept = (
                "and it was not kept: the Batch account has no storage account (give the connection "
                "storage_account_url; the output is then kept in log_container)"
            )
        return f"{who} is gone: {where}, {kept}"


def _job(job_id: str, job: Any) -> Job:
    pool_info = getattr(job, "pool_info", None)
    return Job(
        job_id=job_id,
        state=enum_value(job.state) if job.state is not None else None,
        terminate_reason=getattr(job.execution_info, "termination_reason", None),
        pool_id=getattr(job.execution_info, "pool_id", None) or getattr(pool_info, "pool_id", None),
        auto_pool=getattr(pool_info, "auto_pool_specification", None) is not None,
    )


# How the states of an app's jobs make the app's: the first of these any job is in, else SUCCEEDED.
_PRECEDENCE = (AppState.FAILED, AppState.CANCELLED, AppState.UNKNOWN, AppState.RUNNING, AppState.PENDING)


def _combined(states: list[AppState]) -> AppState:
    if len(states) == 1:
        return states[0]
    return next((state for state in _PRECEDENCE if state in states), AppState.SUCCEEDED)


def _carrier(state: str | None, info: Any) -> Carrier:
    result = getattr(info, "result", None)
    failure = getattr(info, "failure_info", None)
    return Carrier(
        state,
        enum_value(result) if result is not None else None,
        getattr(info, "exit_code", None),
        getattr(failure, "code", None),
    )


def _counts(tasks: Any) -> TaskCounts:
    """The job's task counts, from its task listing (as Batch counts them: preparing is running)."""
    active = running = completed = succeeded = 0
    for task in tasks:
        state = enum_value(task.state) if task.state is not None else None
        if state == "completed":
            completed += 1
            result = getattr(task.execution_info, "result", None)
            succeeded += result is not None and enum_value(result) == "success"
        elif state in ("running", "preparing"):
            running += 1
        else:
            active += 1
    return TaskCounts(active, running, completed, succeeded, completed - succeeded)

"""Tasks: what the client asked to run, and where each attempt stands."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local_azure_batch.lang.times import UNLIMITED_TEXT, parse_duration

from . import validation as v
from .clock import iso, utcnow
from .entity import Entity
from .errors import (
    BatchServiceError,
    invalid_property,
    missing_property,
)
from .identity import normalize_user_identity

if TYPE_CHECKING:
    from local_azure_batch.runner.process import RunHandle

    from .jobs import Job
    from .pools import ComputeNode
    from .task_instances import TaskInstance

ACTIVE, PREPARING, RUNNING, COMPLETED = "active", "preparing", "running", "completed"

# Failure information as the service words it.
FAILURE_EXIT_CODE = {
    "category": "usererror",
    "code": "FailureExitCode",
    "message": "The task exited with an exit code representing a failure",
    "details": [{"name": "Message", "value": "The task exited with an exit code representing a failure"}],
}
TASK_ENDED = {
    "category": "usererror",
    "code": "TaskEnded",
    "message": "Task Was Ended by User Request",
}
WALL_CLOCK_EXCEEDED = {
    "category": "usererror",
    "code": "MaxWallClockTimeExceeded",
    "message": "The task exceeded the maximum wall clock time specified in its constraints and was terminated",
}
# How the service reports a failed coordination command is not documented: this code is a guess that
# names what happened. Like FailureExitCode it is retried up to maxTaskRetryCount, as the docs say.
COORDINATION_FAILED = "CoordinationCommandFailed"


def coordination_failure(instance_id: int, node_id: str, exit_code: int | None) -> dict[str, Any]:
    """A multi-instance task whose coordination command failed; the details say where (0 is the primary)."""
    details = [("SubtaskId", str(instance_id)), ("NodeId", node_id)]
    if exit_code is not None:
        details.append(("ExitCode", str(exit_code)))
    return {
        "category": "usererror",
        "code": COORDINATION_FAILED,
        "message": "The coordination command of the multi-instance task failed on one of its nodes",
        "details": [{"name": name, "value": value} for name, value in details],
    }


def container_preamble(container: Mapping[str, Any] | None) -> str | None:
    """What a command with containerSettings finds at the top of its stderr: there is no container engine here."""
    if not container:
        return None
    return (
        f"[local Batch service] containerSettings.imageName={container.get('imageName')!s}: no container "
        "engine is used here; the command runs on the host.\n"
    )


# How the service reports an image a node could not pull (Azure/Batch issues 49 and 122, nextflow-io/nextflow
# pull request 2099: category UserError, this code and message, details ContainerImage and Message).
CONTAINER_INVALID_IMAGE = "ContainerInvalidImage"
CONTAINER_INVALID_IMAGE_MESSAGE = "One or more container images specified are invalid"


def invalid_image_details(image: str, problem: str) -> list[dict[str, str]]:
    return [{"name": "ContainerImage", "value": image}, {"name": "Message", "value": problem}]


def image_pull_failure(image: str, problem: str) -> dict[str, Any]:
    """The failureInfo of a task whose container image cannot be pulled (here: a malformed reference)."""
    return {
        "category": "usererror",
        "code": CONTAINER_INVALID_IMAGE,
        "message": CONTAINER_INVALID_IMAGE_MESSAGE,
        "details": invalid_image_details(image, problem),
    }


def launch_failure(reason: str) -> dict[str, Any]:
    return {
        "category": "usererror",
        "code": "CommandProgramNotFound",
        "message": "The specified command program is not found",
        "details": [{"name": "Message", "value": reason}],
    }


def normalize_task(body: Any, job: Job, path: str = "") -> dict[str, Any]:
    """Validate an add-task body and fill in the defaults the service reports back."""
    if not isinstance(body, dict):
        raise invalid_property(path or "task", body, "A task must be a JSON object.")
    spec = copy.deepcopy(body)
    v.check_id(v.require(spec, "id", f"{path}id"), f"{path}id")
    if not isinstance(v.require(spec, "commandLine", f"{path}commandLine"), str):
        raise invalid_property(f"{path}commandLine", spec["commandLine"], "The command line must be a string.")
    constraints = spec.setdefault("constraints", {})
    if not isinstance(constraints, dict):
        raise invalid_property(f"{path}constraints", constraints, "The constraints must be an object.")
    v.duration(constraints, "maxWallClockTime", UNLIMITED_TEXT, f"{path}constraints.maxWallClockTime")
    v.duration(constraints, "retentionTime", "P7D", f"{path}constraints.retentionTime")
    if v.integer(constraints, "maxTaskRetryCount", minimum=-1, path=f"{path}constraints.maxTaskRetryCount") is None:
        constraints["maxTaskRetryCount"] = job.spec["constraints"]["maxTaskRetryCount"]
    spec["constraints"] = {
        "maxWallClockTime": constraints["maxWallClockTime"],
        "retentionTime": constraints["retentionTime"],
        "maxTaskRetryCount": constraints["maxTaskRetryCount"],
    }
    normalize_user_identity(spec, path)
    if v.integer(spec, "requiredSlots", minimum=1, path=f"{path}requiredSlots") is None:
        spec["requiredSlots"] = 1
    v.environment_settings(spec.get("environmentSettings"), f"{path}environmentSettings")
    depends_on = spec.get("dependsOn")
    if depends_on is not None:
        if not job.spec.get("usesTaskDependencies"):
            raise BatchServiceError(
                409,
                "TaskDependenciesNotSpecifiedOnJob",
                "The specified job is not configured for task dependencies; set usesTaskDependencies when "
                "creating the job.",
            )
        _check_dependencies(depends_on, path)
    exit_conditions = spec.get("exitConditions")
    if exit_conditions is not None:
        _check_exit_conditions(exit_conditions, job, path)
    multi = spec.get("multiInstanceSettings")
    if multi is not None:
        _check_multi_instance(multi, f"{path}multiInstanceSettings")
    return spec


def _check_multi_instance(multi: Any, path: str) -> None:
    if not isinstance(multi, dict):
        raise invalid_property(path, multi, "multiInstanceSettings must be an object.")
    number = v.integer(multi, "numberOfInstances", minimum=1, path=f"{path}.numberOfInstances")
    multi["numberOfInstances"] = number or 1
    if not isinstance(v.require(multi, "coordinationCommandLine", f"{path}.coordinationCommandLine"), str):
        raise invalid_property(
            f"{path}.coordinationCommandLine", multi["coordinationCommandLine"], "The command line must be a string."
        )
    common = multi.get("commonResourceFiles")
    if common is not None and not isinstance(common, list):
        raise invalid_property(f"{path}.commonResourceFiles", common, "The value must be a list of resource files.")


def _check_dependencies(depends_on: Any, path: str) -> None:
    if not isinstance(depends_on, dict):
        raise invalid_property(f"{path}dependsOn", depends_on, "dependsOn must be an object.")
    ids = depends_on.get("taskIds") or []
    if sum(len(str(item)) for item in ids) > 64000:
        raise invalid_property(f"{path}dependsOn.taskIds", "...", "The task ids exceed 64000 characters in total.")
    for index, item in enumerate(depends_on.get("taskIdRanges") or []):
        start, end = item.get("start"), item.get("end")
        if not isinstance(start, int) or not isinstance(end, int) or start > end:
            raise invalid_property(
                f"{path}dependsOn.taskIdRanges[{index}]",
                f"{start}-{end}",
                "A range needs integer start <= end.",
            )


def _check_exit_conditions(conditions: Any, job: Job, path: str) -> None:
    if not isinstance(conditions, dict):
        raise invalid_property(f"{path}exitConditions", conditions, "exitConditions must be an object.")
    options = [item.get("exitOptions", {}) for item in conditions.get("exitCodes") or []]
    options += [item.get("exitOptions", {}) for item in conditions.get("exitCodeRanges") or []]
    options += [conditions.get(name) or {} for name in ("preProcessingError", "fileUploadError", "default")]
    for option in options:
        v.enum(option, "jobAction", ("none", "disable", "terminate"), path=f"{path}exitConditions.jobAction")
        v.enum(option, "dependencyAction", ("satisfy", "block"), path=f"{path}exitConditions.dependencyAction")
        if option.get("jobAction") not in (None, "none") and job.spec["onTaskFailure"] == "noaction":
            raise invalid_property(
                f"{path}exitConditions.jobAction",
                option["jobAction"],
                "A jobAction needs the job's onTaskFailure to be performexitoptionsjobaction.",
            )
    for index, item in enumerate(conditions.get("exitCodes") or []):
        if not isinstance(item.get("code"), int):
            raise missing_property(f"{path}exitConditions.exitCodes[{index}].code")


class Task(Entity):
    def __init__(self, spec: dict[str, Any], job: Job) -> None:
        super().__init__(ACTIVE, spec)
        self.job = job
        self.execution: dict[str, Any] = {"retryCount": 0, "requeueCount": 0}
        self.node_info: dict[str, Any] | None = None
        self.node: ComputeNode | None = None
        # The task directory on that node (for a multi-instance task, the primary's).
        self.directory: Path | None = None
        self.handle: RunHandle | None = None
        self.slots: int = spec["requiredSlots"]
        # Set while a terminate/delete is killing the process, so its end is reported as such.
        self.end_reason: str | None = None
        # A multi-instance task's instances in its latest attempt: the primary first, then the subtasks.
        self.instances: list[TaskInstance] = []
        # Attempts are numbered from 1; the executionInfo of earlier ones stays for the nodes that ran them.
        self.attempt = 0
        self.past_attempts: dict[int, dict[str, Any]] = {}

    @property
    def path(self) -> str:
        return f"/jobs/{self.job.id}/tasks/{self.id}"

    @property
    def is_multi_instance(self) -> bool:
        return self.spec.get("multiInstanceSettings") is not None

    @property
    def number_of_instances(self) -> int:
        return int((self.spec.get("multiInstanceSettings") or {}).get("numberOfInstances") or 1)

    @property
    def subtasks(self) -> list[TaskInstance]:
        return self.instances[1:]

    def run_handles(self) -> list[RunHandle]:
        """Every process handle of the running attempt, so that ending the task reaches all its nodes."""
        handles = [self.handle] if self.handle is not None else []
        if self.state == RUNNING:
            handles += [instance.handle for instance in self.instances]
        return handles

    @property
    def max_retries(self) -> int:
        return int(self.spec["constraints"]["maxTaskRetryCount"])

    @property
    def wall_clock_seconds(self) -> float | None:
        text = self.spec["constraints"]["maxWallClockTime"]
        if text == UNLIMITED_TEXT:
            return None
        return parse_duration(text).total_seconds()

    @property
    def succeeded(self) -> bool:
        return self.state == COMPLETED and self.execution.get("result") == "success"

    @property
    def failed(self) -> bool:
        return self.state == COMPLETED and self.execution.get("result") == "failure"

    def dependency_ids(self) -> tuple[list[str], list[tuple[int, int]]]:
        depends_on = self.spec.get("dependsOn") or {}
        ranges = [(item["start"], item["end"]) for item in depends_on.get("taskIdRanges") or []]
        return list(depends_on.get("taskIds") or []), ranges

    def exit_options(self) -> dict[str, Any]:
        """The exit options that apply to how the last attempt ended (the service's matching order)."""
        conditions = self.spec.get("exitConditions") or {}
        code = self.execution.get("exitCode")
        failed = self.execution.get("result") == "failure"
        # Documented defaults: terminate/block for failures (when the job acts on failures), none/satisfy else.
        acts = self.job.spec["onTaskFailure"] == "performexitoptionsjobaction"
        options = {
            "jobAction": "terminate" if failed and acts else "none",
            "dependencyAction": "block" if failed else "satisfy",
        }
        matched: dict[str, Any] | None = None
        if code is not None:
            for item in conditions.get("exitCodes") or []:
                if item.get("code") == code:
                    matched = item.get("exitOptions") or {}
                    break
            else:
                for item in conditions.get("exitCodeRanges") or []:
                    if item.get("start", 0) <= code <= item.get("end", -1):
                        matched = item.get("exitOptions") or {}
                        break
        if matched is None and failed:
            # A failed output upload (after an exit code no entry maps), or a task that could not start.
            failure_code = str(self.execution.get("failureInfo", {}).get("code", ""))
            if failure_code.startswith("FileUpload"):
                matched = conditions.get("fileUploadError")
            elif code is None and failure_code != TASK_ENDED["code"]:
                matched = conditions.get("preProcessingError")
        if matched is None and failed:
            matched = conditions.get("default")
        options.update({key: value for key, value in (matched or {}).items() if value is not None})
        return options

    def dependency_satisfied(self) -> bool:
        if self.state != COMPLETED:
            return False
        return self.exit_options()["dependencyAction"] == "satisfy"

    def to_wire(self, base_url: str, fields: Collection[str] | None = None) -> dict[str, Any]:
        out = self._wire_start(f"{base_url}{self.path}", fields)
        self._wire_spec(out, fields)
        if fields is None or "executionInfo" in fields:
            out["executionInfo"] = dict(self.execution)
        if self.node_info is not None and (fields is None or "nodeInfo" in fields):
            out["nodeInfo"] = dict(self.node_info)
        return out

    def recent_info(self, base_url: str, execution: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The task as a node's ``recentTasks`` lists it; a multi-instance primary is subtask 0."""
        out: dict[str, Any] = {
            "taskUrl": f"{base_url}{self.path}",
            "jobId": self.job.id,
            "taskId": self.id,
            "taskState": self.state,
            "executionInfo": dict(self.execution if execution is None else execution),
        }
        if self.is_multi_instance:
            out["subtaskId"] = 0
        return out

    def record_node(self, node: ComputeNode, base_url: str) -> None:
        self.directory = node.dirs.task_dir(self.job.id, self.id)
        self.node_info = node.task_info(base_url, self.directory)

    def _keep_attempt(self, **changes: Any) -> None:
        """Keep the executionInfo of the attempt that is over, before it is reset."""
        if self.attempt and self.attempt not in self.past_attempts:
            self.past_attempts[self.attempt] = {**self.execution, **changes}

    def start_attempt(self) -> None:
        self._keep_attempt()
        self.attempt += 1
        now = iso(utcnow())
        self.execution.pop("endTime", None)
        self.execution.pop("exitCode", None)
        self.execution.pop("result", None)
        self.execution.pop("failureInfo", None)
        self.execution["startTime"] = now
        if self.execution["retryCount"]:
            self.execution["lastRetryTime"] = now

    def finish_attempt(self, exit_code: int | None, failure: Mapping[str, Any] | None) -> None:
        self.execution["endTime"] = iso(utcnow())
        if exit_code is not None:
            self.execution["exitCode"] = exit_code
        if failure is None and exit_code == 0:
            self.execution["result"] = "success"
        else:
            self.execution["result"] = "failure"
            self.execution["failureInfo"] = dict(failure or FAILURE_EXIT_CODE)

    def await_retry(self) -> None:
        """Back to active for another attempt after a failure."""
        self._keep_attempt()
        self.execution["retryCount"] += 1
        self._clear_attempt()

    def requeue(self, counted: bool = True) -> None:
        """Back to active, as when its node left: the attempt did not count as a retry.

        ``counted``: ``requeueCount`` (and ``lastRequeueTime``) count "the number of times the Task has been requeued
        by the Batch service as the result of a user request" (a pool shrunk or a job disabled with ``requeue``;
        the REST reference's TaskExecutionInformation): a Spot node's preemption is none, and is not counted."""
        now = iso(utcnow())
        self._keep_attempt(endTime=now)
        if counted:
            self.execution["requeueCount"] = self.execution.get("requeueCount", 0) + 1
            self.execution["lastRequeueTime"] = now
        self._clear_attempt()

    def _clear_attempt(self) -> None:
        # Only a running or completed task has a start time; end time, exit code, result and failure only a
        # completed one (the service's TaskExecutionInformation).
        for name in ("startTime", "endTime", "exitCode", "result", "failureInfo"):
            self.execution.pop(name, None)

    def reactivate(self) -> None:
        self._keep_attempt()
        self.execution = {"retryCount": 0, "requeueCount": self.execution.get("requeueCount", 0)}

    def attempt_execution(self, attempt: int) -> dict[str, Any]:
        """The executionInfo of one attempt: the current one as it stands, an earlier one as it ended."""
        return self.past_attempts.get(attempt, self.execution) if attempt != self.attempt else self.execution


class RecentRun:
    """A node's ``recentTasks`` entry for one attempt of a task it ran."""

    __slots__ = ("attempt", "task")

    def __init__(self, task: Task) -> None:
        self.task = task
        self.attempt = task.attempt

    def recent_info(self, base_url: str) -> dict[str, Any]:
        return self.task.recent_info(base_url, self.task.attempt_execution(self.attempt))

"""Operations on one compute node: reboot, reimage, deallocate and start, scheduling on or off, remote login
settings, node users, VM extensions, and uploading the node agent's logs (``uploadbatchservicelogs``).

What a node operation does to the tasks running on the node follows its option, as the REST reference says:
``requeue`` (the default) ends them and puts them back in their jobs' queues, ``terminate`` ends them for good,
``taskcompletion`` lets them finish first (no new task starts meanwhile), ``retaineddata`` is ``requeue`` here
(a local node's task directories stay anyway).

Conflicts answer 409 with the service's codes (``NodeBeingRebooted``...); which states allow which operation is
the reference's ("only if it is in an idle or running state"), widened to what the portal offers for a node that
failed (a reboot or reimage of a node whose start task failed or that became unusable).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from local_azure_batch.lang.times import parse_iso_datetime

from . import validation as v
from .account import Account
from .allocation import Allocation
from .clock import iso
from .errors import BatchServiceError, conflict, invalid_property, not_found
from .node_endpoints import remote_login_settings
from .pools import (
    AGENT_LOG,
    CREATING,
    DEALLOCATED,
    DEALLOCATING,
    IDLE,
    LEAVING_POOL,
    OFFLINE,
    REBOOTING,
    REIMAGING,
    RUNNING,
    SCHEDULING_DISABLED,
    SCHEDULING_ENABLED,
    START_TASK_FAILED,
    STARTING,
    UNUSABLE,
    WAITING_FOR_START_TASK,
    ComputeNode,
)

NODE_OPTIONS = ("requeue", "terminate", "taskcompletion", "retaineddata")
SCHEDULING_OPTIONS = ("requeue", "terminate", "taskcompletion")
# States a reboot or reimage may start from; deallocation only from an idle or running node.
RESTARTABLE = (IDLE, RUNNING, OFFLINE, START_TASK_FAILED, UNUSABLE)
DEALLOCATABLE = (IDLE, RUNNING, OFFLINE)
# The code of a conflict with a node in each state (the service's BatchErrorCode names).
BUSY_CODES = {
    CREATING: ("NodeBeingCreated", "The specified compute node is being created."),
    STARTING: ("NodeBeingStarted", "The specified compute node is being started."),
    WAITING_FOR_START_TASK: ("NodeBeingStarted", "The specified compute node is being started."),
    REBOOTING: ("NodeBeingRebooted", "The specified compute node is being rebooted."),
    REIMAGING: ("NodeBeingReimaged", "The specified compute node is being reimaged."),
    UNUSABLE: ("NodeStateUnusable", "The specified compute node is unusable."),
}
# Where the node keeps the start task's output (its node files): uploaded with the agent's log.
START_TASK_FILES = ("startup/stdout.txt", "startup/stderr.txt")
_UNSUPPORTED_IDENTITY = (
    "identityReference (managed identity) cannot be used with the local Batch service: give a SAS URL instead."
)


def _node_state_conflict(node: ComputeNode, operation: str) -> BatchServiceError:
    code, message = BUSY_CODES.get(
        node.state,
        (
            "OperationInvalidForCurrentState",
            f"The operation is not allowed on a compute node in the {node.state} state.",
        ),
    )
    return conflict(code, message, ("NodeState", node.state), ("Operation", operation))


def _already_in_target_state() -> BatchServiceError:
    return conflict(
        "NodeAlreadyInTargetSchedulingState", "The specified compute node is already in the target scheduling state."
    )


@dataclass(frozen=True)
class UploadedLogs:
    """What ``uploadbatchservicelogs`` answers, and the files it uploads (blob name under the directory, bytes)."""

    virtual_directory_name: str
    files: list[tuple[str, bytes]]

    def to_wire(self) -> dict[str, Any]:
        return {"virtualDirectoryName": self.virtual_directory_name, "numberOfFilesUploaded": len(self.files)}


class NodeOperations:
    def __init__(self, account: Account, allocation: Allocation) -> None:
        self.account = account
        self.allocation = allocation

    def _node(self, pool_id: str, node_id: str) -> ComputeNode:
        return self.account.node(pool_id, node_id)

    # -- reboot, reimage, deallocate, start -----------------------------------------------------------
    def reboot(self, pool_id: str, node_id: str, body: Any) -> None:
        node = self._node(pool_id, node_id)
        option = _option(body, "nodeRebootOption", NODE_OPTIONS)
        if node.state not in RESTARTABLE or node.pending_operation is not None or node.leaving:
            raise _node_state_conflict(node, "reboot")
        node.agent_log(f"reboot requested (nodeRebootOption {option})")
        self._after_tasks(node, "reboot", option, self._restart(node, REBOOTING))

    def reimage(self, pool_id: str, node_id: str, body: Any) -> None:
        node = self._node(pool_id, node_id)
        option = _option(body, "nodeReimageOption", NODE_OPTIONS)
        if node.state not in RESTARTABLE or node.pending_operation is not None or node.leaving:
            raise _node_state_conflict(node, "reimage")
        node.agent_log(f"reimage requested (nodeReimageOption {option})")
        self._after_tasks(node, "reimage", option, self._restart(node, REIMAGING))

    def deallocate(self, pool_id: str, node_id: str, body: Any) -> None:
        node = self._node(pool_id, node_id)
        option = _option(body, "nodeDeallocateOption", NODE_OPTIONS)
        if node.state not in DEALLOCATABLE or node.pending_operation is not None or node.leaving:
            raise _node_state_conflict(node, "deallocate")
        node.agent_log(f"deallocation requested (nodeDeallocateOption {option})")
        self._after_tasks(node, "deallocate", option, self._deallocate(node))

    def start(self, pool_id: str, node_id: str) -> None:
        node = self._node(pool_id, node_id)
        if node.state != DEALLOCATED:
            raise _node_state_conflict(node, "start")
        node.set_state(STARTING)
        self.account.spawn(self.allocation.boot(node))

    def _after_tasks(self, node: ComputeNode, operation: str, option: str, then: Any) -> None:
        """Make the node's tasks go as ``option`` says, then run ``then`` (a coroutine)."""
        node.pending_operation = operation
        self.account.spawn(self._stop_tasks_then(node, option, then))

    async def _stop_tasks_then(self, node: ComputeNode, option: str, then: Any) -> None:
        try:
            await self._stop_tasks(node, option)
        except BaseException:
            then.close()
            raise
        node.pending_operation = None
        if node.pool.nodes.get(node.id) is node:
            await then
        else:
            then.close()

    async def _stop_tasks(self, node: ComputeNode, option: str) -> None:
        if option != "taskcompletion":
            for task in list(node.running.values()):
                task.end_reason = "terminate" if option == "terminate" else "requeue"
                await asyncio.gather(*(self.account.runner.terminate(handle) for handle in task.run_handles()))
        while node.running:
            await asyncio.sleep(self.account.settings.tick_seconds)

    async def _restart(self, node: ComputeNode, state: str) -> None:
        node.set_state(state)
        node.errors = []
        node.start_task_info = None
        if state == REIMAGING:  # a fresh operating system disk: the node's files go, its users too
            node.dirs.remove()
            node.users.clear()
            node.agent_log("node reimaged")
        await self.allocation.boot(node)

    async def _deallocate(self, node: ComputeNode) -> None:
        node.set_state(DEALLOCATING)
        await asyncio.sleep(self.account.settings.node_start_seconds / 2)
        if node.pool.nodes.get(node.id) is node:
            node.set_state(DEALLOCATED)
            self.allocation.check(node.pool)

    # -- scheduling -----------------------------------------------------------------------------------
    def disable_scheduling(self, pool_id: str, node_id: str, body: Any) -> None:
        node = self._node(pool_id, node_id)
        option = _option(body, "nodeDisableSchedulingOption", SCHEDULING_OPTIONS)
        if node.scheduling_state == SCHEDULING_DISABLED:
            raise conflict(
                "NodeAlreadyInTargetSchedulingState",
                "The specified compute node is already in the target scheduling state.",
            )
        if node.state in (CREATING, LEAVING_POOL):
            raise _node_state_conflict(node, "disablescheduling")
        node.scheduling_state = SCHEDULING_DISABLED
        node.agent_log(f"task scheduling disabled (nodeDisableSchedulingOption {option})")
        if node.state == IDLE:
            node.set_state(OFFLINE)
        elif node.running and option != "taskcompletion":
            self.account.spawn(self._stop_tasks(node, option))

    def enable_scheduling(self, pool_id: str, node_id: str) -> None:
        node = self._node(pool_id, node_id)
        if node.scheduling_state == SCHEDULING_ENABLED:
            raise conflict(
                "NodeAlreadyInTargetSchedulingState",
                "The specified compute node is already in the target scheduling state.",
            )
        node.scheduling_state = SCHEDULING_ENABLED
        node.agent_log("task scheduling enabled")
        if node.state == OFFLINE:
            node.set_state(IDLE)
        self.account.kick()

    # -- remote login, users --------------------------------------------------------------------------
    def remote_login_settings(self, pool_id: str, node_id: str) -> dict[str, Any]:
        """Where SSH would answer: the node's own loopback address. The local nodes run no SSH server."""
        node = self._node(pool_id, node_id)
        if node.state in (DEALLOCATED, DEALLOCATING):
            raise _node_state_conflict(node, "remoteloginsettings")
        return remote_login_settings(node)

    def create_user(self, pool_id: str, node_id: str, body: Any) -> str:
        node = self._node(pool_id, node_id)
        user = _user_body(body, "user")
        name = str(v.require(user, "name"))
        if name.lower() in node.users:
            raise conflict("NodeUserExists", "The specified node user already exists.")
        windows = "windows" in str(node.pool.spec["virtualMachineConfiguration"]["nodeAgentSKUId"]).lower()
        if windows and user.get("sshPublicKey"):
            raise invalid_property("sshPublicKey", "...", "sshPublicKey cannot be given for a Windows node.")
        if windows and not user.get("password"):
            raise invalid_property("password", None, "A Windows node user needs a password.")
        _check_expiry(user)
        node.users[name.lower()] = {
            "name": name,
            "isAdmin": bool(user.get("isAdmin", False)),
            "expiryTime": user.get("expiryTime"),
            "hasPassword": bool(user.get("password")),
            "sshPublicKey": user.get("sshPublicKey"),
        }
        node.agent_log(f"user {name} created{' (admin)' if user.get('isAdmin') else ''}")
        return name

    def replace_user(self, pool_id: str, node_id: str, user_name: str, body: Any) -> None:
        node = self._node(pool_id, node_id)
        saved = node.users.get(user_name.lower())
        if saved is None:
            raise not_found("NodeUser")
        update = _user_body(body, "nodeUpdateUserParameter")
        _check_expiry(update)
        # Replace: what the body leaves out is cleared (the password of a Linux user, its key, its expiry).
        saved.update(
            expiryTime=update.get("expiryTime"),
            hasPassword=bool(update.get("password")),
            sshPublicKey=update.get("sshPublicKey"),
        )
        node.agent_log(f"user {saved['name']} updated")

    def delete_user(self, pool_id: str, node_id: str, user_name: str) -> None:
        node = self._node(pool_id, node_id)
        saved = node.users.pop(user_name.lower(), None)
        if saved is None:
            raise not_found("NodeUser")
        node.agent_log(f"user {saved['name']} deleted")

    # -- VM extensions --------------------------------------------------------------------------------
    def list_extensions(self, pool_id: str, node_id: str) -> list[dict[str, Any]]:
        node = self._node(pool_id, node_id)
        configuration = node.pool.spec["virtualMachineConfiguration"]
        extensions = [*(configuration.get("extensions") or []), _batch_node_extension(configuration)]
        return [_extension_state(node, extension) for extension in extensions]

    def get_extension(self, pool_id: str, node_id: str, name: str) -> dict[str, Any]:
        for item in self.list_extensions(pool_id, node_id):
            if item["vmExtension"]["name"].lower() == name.lower():
                return item
        raise BatchServiceError(404, "NodeExtensionNotFound", "The specified node extension does not exist.")

    # -- the node agent's logs ------------------------------------------------------------------------
    def upload_logs(self, pool_id: str, node_id: str, body: Any, request_id: str) -> UploadedLogs:
        """Read the node agent's log files written within the window (whole files) for an upload to
        ``containerUrl`` under ``<account>/<pool>/<node>/<request id>``, as the service names it."""
        node = self._node(pool_id, node_id)
        options = _user_body(body, "uploadOptions")
        container_url = str(v.require(options, "containerUrl"))
        if not container_url.lower().startswith(("http://", "https://")):
            raise invalid_property("containerUrl", "...", "The value must be the URL of a Blob container.")
        if options.get("identityReference"):
            raise invalid_property("identityReference", "...", _UNSUPPORTED_IDENTITY)
        start = _time(options, "startTime", required=True)
        end = _time(options, "endTime", required=False)
        if start is not None and end is not None and end < start:
            raise invalid_property("endTime", options["endTime"], "endTime must not be before startTime.")
        node.agent_log(f"uploading service logs written from {options['startTime']}")
        files = []
        candidates = [(AGENT_LOG, node.dirs.agent_logs / AGENT_LOG)]
        candidates += [(relative, node.dirs.root / relative) for relative in START_TASK_FILES]
        for name, path in candidates:
            data = _read_within(path, start, end, node.allocation_time)
            if data is not None:
                files.append((name, data))
        account = hashlib.sha256(self.account.settings.account_name.encode()).hexdigest()[:16].upper()
        return UploadedLogs(f"batch-{account}/{node.pool.id}/{node.id}/{request_id}", files)


def _option(body: Any, name: str, allowed: tuple[str, ...]) -> str:
    if body in (None, {}):
        return "requeue"
    if not isinstance(body, dict):
        raise invalid_property(name, body, "The body must be a JSON object.")
    return v.enum(body, name, allowed, "requeue") or "requeue"


def _user_body(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid_property(what, body, "The body must be a JSON object.")
    return body


def _time(body: dict[str, Any], name: str, *, required: bool) -> datetime | None:
    value = v.require(body, name) if required else body.get(name)
    if value is None:
        return None
    parsed = parse_iso_datetime(str(value))
    if parsed is None:
        raise invalid_property(name, value, "The value must be an ISO 8601 date and time.")
    return parsed


def _check_expiry(user: dict[str, Any]) -> None:
    if user.get("expiryTime") is not None:
        _time(user, "expiryTime", required=False)


def _read_within(path: Path, start: datetime | None, end: datetime | None, created: datetime) -> bytes | None:
    """The whole file if it was written within [start, end] (None: not, or it does not exist)."""
    try:
        modified = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
        if (start is not None and modified < start) or (end is not None and created > end):
            return None
        return path.read_bytes()
    except OSError:
        return None


def _batch_node_extension(configuration: dict[str, Any]) -> dict[str, Any]:
    """The extension the service installs its node agent with, listed beside the pool's own (recorded on a Linux
    node: ``batchNodeExtension``, CustomScript 2.0; the Windows one is a documented guess)."""
    if str(configuration.get("nodeAgentSKUId", "")).lower().startswith("batch.node.windows"):
        publisher, kind, version = "Microsoft.Compute", "CustomScriptExtension", "1.10"
    else:
        publisher, kind, version = "Microsoft.Azure.Extensions", "CustomScript", "2.0"
    return {
        "name": "batchNodeExtension",
        "publisher": publisher,
        "type": kind,
        "typeHandlerVersion": version,
        "autoUpgradeMinorVersion": True,
    }


def _extension_state(node: ComputeNode, extension: dict[str, Any]) -> dict[str, Any]:
    """An extension of the pool as the node reports it: provisioned once the node has booted."""
    booted = node.last_boot_time is not None
    state = "Succeeded" if booted else "Creating"
    settings = {key: value for key, value in extension.items() if key != "protectedSettings"}
    settings.setdefault("autoUpgradeMinorVersion", False)
    settings.setdefault("enableAutomaticUpgrade", False)
    out: dict[str, Any] = {"provisioningState": state, "vmExtension": settings, "instanceView": {}}
    if booted:
        assert node.last_boot_time is not None
        out["instanceView"] = {
            "name": extension.get("name"),
            "statuses": [
                {
                    "code": "ProvisioningState/succeeded",
                    "displayStatus": "Provisioning succeeded",
                    "level": "Info",
                    "message": f"Extension {extension.get('name')} is enabled on the local node.",
                    "time": iso(node.last_boot_time),
                }
            ],
        }
    return out

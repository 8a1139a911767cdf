"""Who a task runs as: the ``userIdentity`` of tasks, start tasks and job preparation and release tasks.

Nodes here run every process as the service's own OS user, so elevation is recorded, not granted: a task reads
who it runs as from ``AZ_BATCH_TASK_USER_IDENTITY`` as on a Batch Linux node (``PoolNonAdmin`` for the default
automatic user; ``PoolAdmin``, ``TaskNonAdmin``, ``TaskAdmin`` for the others; a named user's name) and
``AZ_BATCH_TASK_USER`` (``_azbatch`` for automatic users, the account name otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import validation as v
from .errors import invalid_property

AUTO_USER = "_azbatch"


def normalize_user_identity(body: dict[str, Any], path: str) -> None:
    """``body["userIdentity"]`` checked (a user name or an automatic user, not both), the defaults filled in."""
    identity = body.get("userIdentity")
    if identity is None:
        body["userIdentity"] = {"autoUser": {"scope": "pool", "elevationLevel": "nonadmin"}}
        return
    where = f"{path}userIdentity"
    if not isinstance(identity, dict):
        raise invalid_property(where, identity, "The value must be a JSON object.")
    username, auto = identity.get("username"), identity.get("autoUser")
    if (username is None) == (auto is None):
        raise invalid_property(
            where,
            "...",
            "The userName and autoUser properties are mutually exclusive; you must specify one but not both.",
        )
    if username is not None:
        if not isinstance(username, str) or not username:
            raise invalid_property(f"{where}.username", username, "The value must be the name of a user account.")
        return
    if not isinstance(auto, dict):
        raise invalid_property(f"{where}.autoUser", auto, "The value must be a JSON object.")
    v.enum(auto, "scope", ("task", "pool"), "pool", f"{where}.autoUser.scope")
    v.enum(auto, "elevationLevel", ("nonadmin", "admin"), "nonadmin", f"{where}.autoUser.elevationLevel")


def username(spec: dict[str, Any]) -> str | None:
    return (spec.get("userIdentity") or {}).get("username")


def identity_variables(spec: Mapping[str, Any]) -> dict[str, str]:
    """``AZ_BATCH_TASK_USER`` and ``AZ_BATCH_TASK_USER_IDENTITY`` for a task with this (normalized) spec."""
    identity = spec.get("userIdentity") or {}
    if identity.get("username"):
        return {"AZ_BATCH_TASK_USER": identity["username"], "AZ_BATCH_TASK_USER_IDENTITY": identity["username"]}
    auto = identity.get("autoUser") or {}
    scope = "Task" if auto.get("scope") == "task" else "Pool"
    elevation = "Admin" if auto.get("elevationLevel") == "admin" else "NonAdmin"
    return {"AZ_BATCH_TASK_USER": AUTO_USER, "AZ_BATCH_TASK_USER_IDENTITY": f"{scope}{elevation}"}

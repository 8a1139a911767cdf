"""Azure RBAC on the management plane: built-in role definitions, role assignments, and what a principal may do.

A principal's assignments are those it was started with (``--principal ...:reader``: Reader on the subscription,
``account-reader``: Reader on the Batch account, ``contributor``, ``owner``) and those made since through
``PUT {scope}/providers/Microsoft.Authorization/roleAssignments/{name}`` (what ``az role assignment create``
sends). An assignment at a scope covers every scope below it. What it allows is its role's ``actions`` less its
``notActions``, matched as ARM matches them: case-insensitively, ``*`` standing for any characters.

The role definitions are Azure's built-in ones, with their ids and the actions that matter here (Reader,
Contributor, Owner, Network Contributor); data-plane roles (Azure Batch Data Contributor) allow no action here.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from local_azure_batch.auth.roles import RoleAssignment

# Built-in role definition ids (the same in every tenant) and the actions that matter here.
BUILT_IN_ROLES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "Reader": ("acdd72a7-3385-48ef-bd42-f606fba81ae7", ("*/read",), ()),
    "Contributor": (
        "b24988ac-6180-42a0-ab88-20f7382dd24c",
        ("*",),
        (
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
        ),
    ),
    "Owner": ("8e3af657-a8ff-443c-a75c-2fe8c4bcb635", ("*",), ()),
    "Network Contributor": (
        "4d97b98b-1d4f-4787-a291-c67834d212e7",
        (
            "Microsoft.Authorization/*/read",
            "Microsoft.Network/*",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
        ),
        (),
    ),
}


def role_definition_id(subscription_id: str, role: str) -> str:
    return (
        f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{BUILT_IN_ROLES[role][0]}"
    )


def role_named_by(definition_id: str) -> str | None:
    """The built-in role a ``roleDefinitionId`` names (by its trailing guid), or None."""
    guid = definition_id.rstrip("/").rsplit("/", 1)[-1].lower()
    return next((name for name, (role_id, _, _) in BUILT_IN_ROLES.items() if role_id == guid), None)


def role_definition(subscription_id: str, role: str) -> dict[str, Any]:
    role_id, actions, not_actions = BUILT_IN_ROLES[role]
    return {
        "id": role_definition_id(subscription_id, role),
        "name": role_id,
        "type": "Microsoft.Authorization/roleDefinitions",
        "properties": {
            "roleName": role,
            "type": "BuiltInRole",
            "assignableScopes": ["/"],
            "permissions": [
                {"actions": list(actions), "notActions": list(not_actions), "dataActions": [], "notDataActions": []}
            ],
        },
    }


def covers(scope: str, target: str) -> bool:
    """Whether an assignment at ``scope`` applies at ``target`` (the same resource or one below it)."""
    scope, target = scope.rstrip("/").lower(), target.rstrip("/").lower()
    return target == scope or target.startswith(scope + "/")


def allows(actions: tuple[str, ...] | list[str], not_actions: tuple[str, ...] | list[str], action: str) -> bool:
    def matches(patterns: tuple[str, ...] | list[str]) -> bool:
        return any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in patterns)

    return matches(actions) and not matches(not_actions)


@dataclass
class Assignments:
    """The role assignments made through Resource Manager, by their resource id (lower-case)."""

    subscription_id: str
    account_id: str
    made: dict[str, dict[str, Any]] = field(default_factory=dict)

    def started_with(self, object_id: str, roles: frozenset[RoleAssignment]) -> list[tuple[str, str]]:
        """(role, scope) of the assignments a principal was started with."""
        scopes = {"subscription": f"/subscriptions/{self.subscription_id}", "account": self.account_id}
        return [
            (assignment.role, scopes[assignment.scope]) for assignment in roles if assignment.role in BUILT_IN_ROLES
        ]

    def of(self, object_id: str, roles: frozenset[RoleAssignment]) -> list[tuple[str, str]]:
        made = [
            (role, str(body["properties"]["scope"]))
            for body in self.made.values()
            if str(body["properties"].get("principalId", "")).lower() == object_id.lower()
            and (role := role_named_by(str(body["properties"].get("roleDefinitionId", "")))) is not None
        ]
        return self.started_with(object_id, roles) + made

    def permissions(self, object_id: str, roles: frozenset[RoleAssignment], target: str) -> list[dict[str, Any]]:
        """What ``GET {target}/providers/Microsoft.Authorization/permissions`` answers: one entry per assignment."""
        entries = []
        for role, scope in self.of(object_id, roles):
            if covers(scope, target):
                _, actions, not_actions = BUILT_IN_ROLES[role]
                entries.append(
                    {"actions": list(actions), "notActions": list(not_actions), "dataActions": [], "notDataActions": []}
                )
        return entries

    def allowed(self, object_id: str, roles: frozenset[RoleAssignment], target: str, action: str) -> bool:
        return any(
            allows(entry["actions"], entry["notActions"], action)
            for entry in self.permissions(object_id, roles, target)
        )

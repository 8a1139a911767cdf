"""The resources of other providers a Batch deployment leans on, as Resource Manager serves them: storage accounts
(``Microsoft.Storage``: public network access, network rules), virtual networks, their subnets and network
security groups (``Microsoft.Network``), and role assignments (``Microsoft.Authorization``).

Kept in memory and written as Azure's own clients write them, so a test sets the state with the requests an
``az`` command sends (``az storage account update`` a PATCH, ``az network vnet subnet create`` a PUT of the subnet,
``az role assignment create`` a PUT of the assignment)::

    GET | PUT | PATCH  .../resourceGroups/{rg}/providers/Microsoft.Storage/storageAccounts/{name}
    GET                /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.Storage/storageAccounts
    GET | PUT          .../providers/Microsoft.Network/virtualNetworks/{vnet}[/subnets/{subnet}]
    GET | PUT          .../providers/Microsoft.Network/networkSecurityGroups/{nsg}[/securityRules/{rule}]
    GET | PUT | DELETE {scope}/providers/Microsoft.Authorization/roleAssignments/{name}
    GET                {scope}/providers/Microsoft.Authorization/roleAssignments | roleDefinitions | permissions

Resource groups are not modelled: any name holds what was put in it. A new storage account, subnet or network
security group gets Azure's defaults (public network access on, network rules allowing all, the default security
rules).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from local_azure_batch.auth.roles import RoleAssignment

from .access import BUILT_IN_ROLES, Assignments, role_definition, role_named_by
from .errors import ArmError, authorization_failed

_SUB = r"/subscriptions/(?P<sub>[^/]+)"
_RG = r"/resourcegroups/(?P<rg>[^/]+)"
_PATHS = {
    "storage": rf"{_SUB}{_RG}/providers/microsoft\.storage/storageaccounts/(?P<name>[^/]+)",
    "storage-list": rf"{_SUB}(?:{_RG})?/providers/microsoft\.storage/storageaccounts",
    "vnet": rf"{_SUB}{_RG}/providers/microsoft\.network/virtualnetworks/(?P<name>[^/]+)",
    "subnet": rf"{_SUB}{_RG}/providers/microsoft\.network/virtualnetworks/(?P<name>[^/]+)/subnets/(?P<child>[^/]+)",
    "nsg": rf"{_SUB}{_RG}/providers/microsoft\.network/networksecuritygroups/(?P<name>[^/]+)",
    "rule": rf"{_SUB}{_RG}/providers/microsoft\.network/networksecuritygroups/(?P<name>[^/]+)/securityrules/"
    r"(?P<child>[^/]+)",
    "authorization": r"(?P<scope>/subscriptions/[^?]*?)/providers/microsoft\.authorization/"
    r"(?P<kind>roleassignments|roledefinitions|permissions)(?:/(?P<name>[^/]+))?",
}
PATTERNS = {kind: re.compile(f"{pattern}/?", re.IGNORECASE) for kind, pattern in _PATHS.items()}
TYPES = {
    "storage": "Microsoft.Storage/storageAccounts",
    "vnet": "Microsoft.Network/virtualNetworks",
    "subnet": "Microsoft.Network/virtualNetworks/subnets",
    "nsg": "Microsoft.Network/networkSecurityGroups",
    "rule": "Microsoft.Network/networkSecurityGroups/securityRules",
}
# Where a parent keeps its children, as Azure returns them.
_CHILDREN = {"subnet": ("vnet", "subnets"), "rule": ("nsg", "securityRules")}
# Azure's default rules of every network security group (priority, name, direction, access, source, destination).
_DEFAULT_RULES = (
    (65000, "AllowVnetInBound", "Inbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
    (65001, "AllowAzureLoadBalancerInBound", "Inbound", "Allow", "AzureLoadBalancer", "*"),
    (65500, "DenyAllInBound", "Inbound", "Deny", "*", "*"),
    (65000, "AllowVnetOutBound", "Outbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
    (65001, "AllowInternetOutBound", "Outbound", "Allow", "*", "Internet"),
    (65500, "DenyAllOutBound", "Outbound", "Deny", "*", "*"),
)


@dataclass(frozen=True)
class Caller:
    """Who sent a request: its token's application and object ids, and the roles it was started with."""

    client_id: str
    object_id: str
    roles: frozenset[RoleAssignment] = frozenset()


@dataclass
class Resources:
    subscription_id: str
    location: str
    assignments: Assignments
    items: dict[str, dict[str, Any]] = field(default_factory=dict)

    def seed_storage_account(self, resource_group: str, name: str) -> None:
        """A storage account as ``az storage account create`` leaves it (the development one, for one)."""
        path = (
            f"/subscriptions/{self.subscription_id}/resourceGroups/{resource_group}/providers/{TYPES['storage']}/{name}"
        )
        self.items[path.lower()] = self._new("storage", path, name, {})

    # -- dispatch -------------------------------------------------------------------------------------
    def serves(self, path: str) -> bool:
        return any(pattern.fullmatch(path) for pattern in PATTERNS.values())

    def answer(self, method: str, path: str, body: dict[str, Any], caller: Caller) -> tuple[int, dict[str, Any]]:
        for kind in ("subnet", "rule", "storage", "vnet", "nsg", "storage-list", "authorization"):
            match = PATTERNS[kind].fullmatch(path)
            if match is None:
                continue
            if kind == "authorization":
                return self._authorization(method, match, body, caller)
            if kind == "storage-list":
                self._allow(caller, path, f"{TYPES['storage']}/read", method, {"GET"})
                return 200, {"value": [copy.deepcopy(item) for item in self._listed(path)]}
            return self._resource(kind, method, path.rstrip("/"), match, body, caller)
        raise ArmError(404, "NotFound", f"The resource path '{path}' is not one this local management plane serves.")

    def _allow(self, caller: Caller, scope: str, action: str, method: str, methods: set[str]) -> None:
        if method not in methods:
            raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed here.")
        if not self.assignments.allowed(caller.object_id, caller.roles, scope, action):
            raise authorization_failed(caller.client_id, caller.object_id, action, scope)

    # -- storage accounts, virtual networks, network security groups ----------------------------------
    def _resource(
        self, kind: str, method: str, path: str, match: re.Match[str], body: dict[str, Any], caller: Caller
    ) -> tuple[int, dict[str, Any]]:
        verb = {"GET": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete"}.get(method, method.lower())
        methods = {"GET", "PUT", "PATCH"} if kind == "storage" else {"GET", "PUT"}
        self._allow(caller, path, f"{TYPES[kind]}/{verb}", method, methods)
        if kind in _CHILDREN:
            return self._child(kind, method, path, match, body)
        found = self.items.get(path.lower())
        if method == "GET":
            if found is None:
                raise _not_found(TYPES[kind], match["name"], match["rg"])
            return 200, copy.deepcopy(found)
        if method == "PATCH":
            if found is None:
                raise _not_found(TYPES[kind], match["name"], match["rg"])
            found["properties"].update(body.get("properties") or {})
            return 200, copy.deepcopy(found)
        self.items[path.lower()] = self._new(kind, path, match["name"], body)
        return (200 if found is not None else 201), copy.deepcopy(self.items[path.lower()])

    def _child(
        self, kind: str, method: str, path: str, match: re.Match[str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        parent_kind, key = _CHILDREN[kind]
        parent_path = path.rsplit("/", 2)[0]
        parent = self.items.get(parent_path.lower())
        if parent is None:
            raise _not_found(TYPES[parent_kind], match["name"], match["rg"])
        children = parent["properties"].setdefault(key, [])
        found = next((child for child in children if child["id"].lower() == path.lower()), None)
        if method == "GET":
            if found is None:
                raise _not_found(TYPES[kind], f"{match['name']}/{match['child']}", match["rg"])
            return 200, copy.deepcopy(found)
        properties = {**(body.get("properties") or {}), "provisioningState": "Succeeded"}
        child = {"id": path, "name": match["child"], "type": TYPES[kind], "properties": properties}
        parent["properties"][key] = [item for item in children if item is not found] + [child]
        return (200 if found is not None else 201), copy.deepcopy(child)

    def _new(self, kind: str, path: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        properties = copy.deepcopy(body.get("properties") or {})
        properties["provisioningState"] = "Succeeded"
        if kind == "storage":
            properties.setdefault("publicNetworkAccess", "Enabled")
            acls = properties.setdefault("networkAcls", {})
            acls.setdefault("bypass", "AzureServices")
            acls.setdefault("virtualNetworkRules", [])
            acls.setdefault("ipRules", [])
            acls.setdefault("defaultAction", "Allow")
            properties.setdefault("privateEndpointConnections", [])
            properties["primaryEndpoints"] = {"blob": f"https://{name}.blob.core.windows.net/"}
        for child_kind, (parent_kind, key) in _CHILDREN.items():
            if parent_kind == kind:
                properties[key] = [
                    {
                        "id": f"{path}/{key}/{item['name']}",
                        "name": item["name"],
                        "type": TYPES[child_kind],
                        "properties": {**(item.get("properties") or {}), "provisioningState": "Succeeded"},
                    }
                    for item in properties.get(key) or []
                ]
        if kind == "nsg":
            properties["defaultSecurityRules"] = [_default_rule(path, *rule) for rule in _DEFAULT_RULES]
        return {
            "id": path,
            "name": name,
            "type": TYPES[kind],
            "location": body.get("location") or self.location,
            **(
                {"kind": body.get("kind", "StorageV2"), "sku": body.get("sku") or {"name": "Standard_LRS"}}
                if kind == "storage"
                else {}
            ),
            "properties": properties,
        }

    def _listed(self, path: str) -> list[dict[str, Any]]:
        prefix = path.lower().rsplit("/providers/", 1)[0] + "/"
        return [item for key, item in self.items.items() if key.startswith(prefix) and item["type"] == TYPES["storage"]]

    # -- role assignments, role definitions, the caller's permissions ---------------------------------
    def _authorization(
        self, method: str, match: re.Match[str], body: dict[str, Any], caller: Caller
    ) -> tuple[int, dict[str, Any]]:
        scope, kind, name = match["scope"], match["kind"].lower(), match["name"]
        if kind == "permissions":
            self._allow(caller, scope, "Microsoft.Authorization/permissions/read", method, {"GET"})
            return 200, {"value": self.assignments.permissions(caller.object_id, caller.roles, scope)}
        if kind == "roledefinitions":
            if method != "GET":
                raise ArmError(405, "MethodNotAllowed", f"The requested method '{method}' is not allowed here.")
            return 200, {"value": [role_definition(self.subscription_id, role) for role in BUILT_IN_ROLES]}
        if name is None:
            self._allow(caller, scope, "Microsoft.Authorization/roleAssignments/read", method, {"GET"})
            made = [item for item in self.assignments.made.values() if _under(item["properties"]["scope"], scope)]
            return 200, {"value": copy.deepcopy(made)}
        verb = {"GET": "read", "PUT": "write", "DELETE": "delete"}.get(method, "write")
        path = f"{scope}/providers/Microsoft.Authorization/roleAssignments/{name}"
        self._allow(caller, scope, f"Microsoft.Authorization/roleAssignments/{verb}", method, {"GET", "PUT", "DELETE"})
        found = self.assignments.made.get(path.lower())
        if method == "GET":
            if found is None:
                raise ArmError(404, "RoleAssignmentNotFound", f"The role assignment '{name}' is not found.")
            return 200, copy.deepcopy(found)
        if method == "DELETE":
            self.assignments.made.pop(path.lower(), None)
            return (200, copy.deepcopy(found)) if found is not None else (204, {})
        return self._assign(path, name, scope, body)

    def _assign(self, path: str, name: str, scope: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        properties = body.get("properties") or {}
        definition = str(properties.get("roleDefinitionId", ""))
        if role_named_by(definition) is None:
            raise ArmError(
                400,
                "RoleDefinitionDoesNotExist",
                f"The specified role definition with ID '{definition}' does not exist.",
            )
        principal = str(properties.get("principalId", ""))
        for made in self.assignments.made.values():
            same = made["properties"]
            if (same["principalId"], same["roleDefinitionId"].lower(), same["scope"].lower()) == (
                principal,
                definition.lower(),
                scope.lower(),
            ):
                raise ArmError(409, "RoleAssignmentExists", "The role assignment already exists.")
        assignment = {
            "id": path,
            "name": name,
            "type": "Microsoft.Authorization/roleAssignments",
            "properties": {
                "roleDefinitionId": definition,
                "principalId": principal,
                "principalType": properties.get("principalType", "ServicePrincipal"),
                "scope": scope,
            },
        }
        self.assignments.made[path.lower()] = assignment
        return 201, copy.deepcopy(assignment)


def _under(scope: str, at: str) -> bool:
    scope, at = scope.lower().rstrip("/"), at.lower().rstrip("/")
    return scope == at or scope.startswith(at + "/") or at.startswith(scope + "/")


def _default_rule(
    nsg: str, priority: int, name: str, direction: str, access: str, source: str, destination: str
) -> dict[str, Any]:
    return {
        "id": f"{nsg}/defaultSecurityRules/{name}",
        "name": name,
        "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
        "properties": {
            "protocol": "*",
            "sourcePortRange": "*",
            "destinationPortRange": "*",
            "sourceAddressPrefix": source,
            "destinationAddressPrefix": destination,
            "access": access,
            "priority": priority,
            "direction": direction,
            "provisioningState": "Succeeded",
        },
    }


def _not_found(kind: str, name: str, resource_group: str) -> ArmError:
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource '{kind}/{name}' under resource group '{resource_group}' was not found. For more details please "
        "go to https://aka.ms/ARMResourceNotFoundFix",
    )

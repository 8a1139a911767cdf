"""Azure role assignments of the token authority's principals: what each lets a principal do here.

Azure decides with role assignments on scopes; this service models the three that a Batch client meets:

- ``Azure Batch Data Contributor`` on the Batch account: the whole Batch data plane (pools, jobs, tasks,
  files). Without a data-plane role, a valid token is refused with ``403 AuthorizationFailure``, "This request
  is not authorized to perform this operation." (the code and message of a real answer, quoted in
  Azure/BatchExplorer issue 2203).
- ``Reader`` on the subscription: every read of the management plane (the Batch account, its quotas, the VM
  sizes Batch offers in a region).
- ``Reader`` on the Batch account only: reads of the account itself; the region's VM sizes, a
  subscription-level read, are refused (``403 AuthorizationFailed``).
- ``Contributor`` and ``Owner`` on the subscription: writes of the management plane too (storage accounts,
  virtual networks, network security groups; Owner also role assignments), as ``management/access.py`` decides.

On the command line a principal's roles are named by the short names of ``ROLE_NAMES``.
"""

from __future__ import annotations

from dataclasses import dataclass

BATCH_DATA_CONTRIBUTOR = "Azure Batch Data Contributor"
READER = "Reader"
CONTRIBUTOR = "Contributor"
OWNER = "Owner"


@dataclass(frozen=True)
class RoleAssignment:
    role: str
    scope: str  # "account" or "subscription"

    def describe(self) -> str:
        return f"{self.role} on the {'Batch account' if self.scope == 'account' else 'subscription'}"


ROLE_NAMES: dict[str, RoleAssignment] = {
    "batch-data-contributor": RoleAssignment(BATCH_DATA_CONTRIBUTOR, "account"),
    "reader": RoleAssignment(READER, "subscription"),
    "account-reader": RoleAssignment(READER, "account"),
    "contributor": RoleAssignment(CONTRIBUTOR, "subscription"),
    "owner": RoleAssignment(OWNER, "subscription"),
}


def parse_roles(text: str) -> frozenset[RoleAssignment]:
    """``batch-data-contributor,reader`` → the assignments; ``none`` or empty → none."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    if names == ["none"]:
        return frozenset()
    unknown = [name for name in names if name not in ROLE_NAMES]
    if unknown:
        raise ValueError(f"unknown role(s) {', '.join(unknown)}; known: {', '.join(ROLE_NAMES)} (or none)")
    return frozenset(ROLE_NAMES[name] for name in names)


def can_use_data_plane(roles: frozenset[RoleAssignment]) -> bool:
    return ROLE_NAMES["batch-data-contributor"] in roles


def can_read(roles: frozenset[RoleAssignment], scope: str) -> bool:
    """Whether a management-plane read at ``scope`` ("account" or "subscription") is allowed."""
    readers = {assignment.scope for assignment in roles if assignment.role in (READER, CONTRIBUTOR, OWNER)}
    return "subscription" in readers or (scope == "account" and "account" in readers)

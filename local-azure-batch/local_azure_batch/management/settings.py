"""What the management plane says about the account: where it lives, its allocation mode and its core quotas.

The core quotas are reported, not enforced: simulated nodes have no cores (``--node-quota`` bounds the nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from local_azure_batch.account import DEV_RESOURCE_GROUP

BATCH_SERVICE = "BatchService"
USER_SUBSCRIPTION = "UserSubscription"
POOL_ALLOCATION_MODES = (BATCH_SERVICE, USER_SUBSCRIPTION)
# The quotas the account reports when the service was given none: generous, so that the examples fit.
DEFAULT_CORE_QUOTA = 500
DEFAULT_POOL_QUOTA = 100
DEFAULT_ACTIVE_JOB_QUOTA = 300


@dataclass
class ManagementSettings:
    resource_group: str = DEV_RESOURCE_GROUP
    pool_allocation_mode: str = BATCH_SERVICE
    # Dedicated vCPUs per VM family (the SKU list's familyName); a family not named has the default.
    core_quotas: dict[str, int] = field(default_factory=dict)
    default_core_quota: int = DEFAULT_CORE_QUOTA
    low_priority_core_quota: int = DEFAULT_CORE_QUOTA


# Azurite's account, which the development set-up uses: listed by Resource Manager like any storage account.
DEV_STORAGE_ACCOUNT = "devstoreaccount1"

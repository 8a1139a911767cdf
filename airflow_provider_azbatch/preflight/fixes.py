"""The commands a finding's fix names: role assignments, key lookups, quota requests (checked against the Azure
CLI's reference: ``az role assignment create``, ``az batch account keys list``, ``az storage account keys list``,
``az batch location list-skus``, ``az vm list-usage``, ``az batch pool supported-images list``)."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_azbatch.hooks.management import BatchAccountInfo
from airflow_provider_azbatch.preflight.report import Identity

BATCH_DATA_ROLE = "Azure Batch Data Contributor"
BLOB_DATA_ROLE = "Storage Blob Data Contributor"
READER_ROLE = "Reader"
NETWORK_ROLE = "Network Contributor"


@dataclass
class Where:
    """Where the account is, as far as the check knows (from the connection, then from Resource Manager)."""

    account_name: str
    account_url: str
    subscription_id: str | None = None
    resource_group: str | None = None
    location: str | None = None

    def learn(self, account: BatchAccountInfo) -> None:
        self.resource_group = account.resource_group or self.resource_group
        self.location = account.location or self.location

    @property
    def group_or_placeholder(self) -> str:
        return self.resource_group or "<resource group>"

    @property
    def account_scope(self) -> str:
        """The Batch account's resource id, or the command that prints it."""
        if self.subscription_id and self.resource_group:
            return (
                f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}/providers/"
                f"Microsoft.Batch/batchAccounts/{self.account_name}"
            )
        return (
            f"$(az batch account show --name {self.account_name} --resource-group {self.group_or_placeholder} "
            "--query id --output tsv)"
        )

    @property
    def subscription_scope(self) -> str:
        return f"/subscriptions/{self.subscription_id or '<subscription id>'}"

    @property
    def location_or_placeholder(self) -> str:
        return self.location or "<region>"


def assign_role(role: str, identity: Identity | None, scope: str) -> str:
    """``az role assignment create`` for the connection's principal (by object id when the token named it)."""
    if identity is not None and identity.object_id:
        who = f"--assignee-object-id {identity.object_id} --assignee-principal-type {identity.principal_type}"
    elif identity is not None and identity.application_id:
        who = f"--assignee {identity.application_id}"
    else:
        who = "--assignee <the identity's object id>"
    return f'az role assignment create --role "{role}" {who} --scope {scope}'


def storage_scope(storage_account: str) -> str:
    return f"$(az storage account show --name {storage_account} --query id --output tsv)"


def resource_group_of(resource_id: str) -> str:
    """The resource group an ARM id names, or a placeholder."""
    parts = resource_id.split("/")
    lowered = [part.lower() for part in parts]
    return parts[lowered.index("resourcegroups") + 1] if "resourcegroups" in lowered else "<resource group>"

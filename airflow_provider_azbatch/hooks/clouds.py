"""The Azure clouds a connection can point at: token scope, authority, portal and Resource Manager of each."""

from __future__ import annotations

from dataclasses import dataclass

from azure.identity import AzureAuthorityHosts


@dataclass(frozen=True)
class AzureCloud:
    name: str
    batch_scope: str
    authority_host: str
    portal_url: str
    # Azure Resource Manager (the management plane: the account's quotas, the region's VM sizes); "" unknown.
    resource_manager_url: str = ""

    @property
    def resource_manager_scope(self) -> str:
        """The token scope of Resource Manager: its resource, the endpoint itself for the public clouds' ARM."""
        return f"{self.resource_manager_url.rstrip('/')}/.default" if self.resource_manager_url else ""


CLOUDS: dict[str, AzureCloud] = {
    # The double slash is what the Batch resource expects (the SDK's own default scope).
    "public": AzureCloud(
        "public",
        "https://batch.core.windows.net//.default",
        AzureAuthorityHosts.AZURE_PUBLIC_CLOUD,
        "https://portal.azure.com",
        "https://management.azure.com",
    ),
    "us_government": AzureCloud(
        "us_government",
        "https://batch.core.usgovcloudapi.net//.default",
        AzureAuthorityHosts.AZURE_GOVERNMENT,
        "https://portal.azure.us",
        "https://management.usgovcloudapi.net",
    ),
    "china": AzureCloud(
        "china",
        "https://batch.chinacloudapi.cn//.default",
        AzureAuthorityHosts.AZURE_CHINA,
        "https://portal.azure.cn",
        "https://management.chinacloudapi.cn",
    ),
}

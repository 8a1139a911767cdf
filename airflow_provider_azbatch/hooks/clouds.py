"""The Azure clouds a connection can point at: token scope, authority and portal of each."""

from __future__ import annotations

from dataclasses import dataclass

from azure.identity import AzureAuthorityHosts


@dataclass(frozen=True)
class AzureCloud:
    name: str
    batch_scope: str
    authority_host: str
    portal_url: str


CLOUDS: dict[str, AzureCloud] = {
    # The double slash is what the Batch resource expects (the SDK's own default scope).
    "public": AzureCloud(
        "public",
        "https://batch.core.windows.net//.default",
        AzureAuthorityHosts.AZURE_PUBLIC_CLOUD,
        "https://portal.azure.com",
    ),
    "us_government": AzureCloud(
        "us_government",
        "https://batch.core.usgovcloudapi.net//.default",
        AzureAuthorityHosts.AZURE_GOVERNMENT,
        "https://portal.azure.us",
    ),
    "china": AzureCloud(
        "china", "https://batch.chinacloudapi.cn//.default", AzureAuthorityHosts.AZURE_CHINA, "https://portal.azure.cn"
    ),
}

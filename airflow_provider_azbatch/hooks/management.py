"""The Batch management plane (Azure Resource Manager, ``Microsoft.Batch``): the reads the preflight check needs.

Plain REST through azure-core's pipeline (retries, bearer tokens, proxies, TLS trust), so no management SDK is
needed: the Batch account (region, pool allocation mode, quotas, per VM family too), the subscription's Batch
accounts (to find the account's resource group), and the VM sizes Batch offers in a region with their quota
family. ARM answers errors as ``{"error": {"code", "message"}}``: they are raised as azure-core's exceptions
with that code and message (``ClientAuthenticationError`` for 401, ``ResourceNotFoundError`` for 404,
``HttpResponseError`` otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from azure.core import PipelineClient
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.core.pipeline.policies import (
    BearerTokenCredentialPolicy,
    HeadersPolicy,
    NetworkTraceLoggingPolicy,
    RequestIdPolicy,
    RetryPolicy,
    UserAgentPolicy,
)
from azure.core.rest import HttpRequest

from airflow_provider_azbatch.hooks.proxies import proxy_kwargs

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

# Microsoft.Batch's management API version (stable since 2024-07; the shape of the reads below is the same in
# every version from 2023-05-01).
API_VERSION = "2024-07-01"
BATCH_SERVICE = "BatchService"


@dataclass(frozen=True)
class BatchAccountInfo:
    """What Resource Manager says about a Batch account (``properties`` of ``BatchAccount_Get``)."""

    id: str
    name: str
    location: str
    endpoint: str
    pool_allocation_mode: str
    dedicated_core_quota: int | None = None
    low_priority_core_quota: int | None = None
    # Dedicated vCPUs per VM family (familyName as the VM size list names it); empty in user subscription mode.
    family_quotas: dict[str, int] = field(default_factory=dict)
    family_quotas_enforced: bool = False
    pool_quota: int | None = None
    active_job_quota: int | None = None

    @property
    def resource_group(self) -> str:
        parts = self.id.split("/")
        lowered = [part.lower() for part in parts]
        return parts[lowered.index("resourcegroups") + 1] if "resourcegroups" in lowered else ""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> BatchAccountInfo:
        properties = body.get("properties") or {}
        families = properties.get("dedicatedCoreQuotaPerVMFamily") or []
        return cls(
            id=str(body.get("id", "")),
            name=str(body.get("name", "")),
            location=str(body.get("location", "")),
            endpoint=str(properties.get("accountEndpoint", "")),
            pool_allocation_mode=str(properties.get("poolAllocationMode") or BATCH_SERVICE),
            dedicated_core_quota=properties.get("dedicatedCoreQuota"),
            low_priority_core_quota=properties.get("lowPriorityCoreQuota"),
            family_quotas={str(f["name"]): int(f["coreQuota"]) for f in families if "name" in f and "coreQuota" in f},
            family_quotas_enforced=bool(properties.get("dedicatedCoreQuotaPerVMFamilyEnforced", False)),
            pool_quota=properties.get("poolQuota"),
            active_job_quota=properties.get("activeJobAndJobScheduleQuota"),
        )


@dataclass(frozen=True)
class VmSku:
    """A VM size Batch offers in a region (``Location_ListSupportedVirtualMachineSkus``)."""

    name: str
    family: str
    vcpus: int | None
    low_priority_capable: bool

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> VmSku:
        capabilities = {str(c.get("name")): str(c.get("value")) for c in body.get("capabilities") or []}
        vcpus = capabilities.get("vCPUs")
        return cls(
            name=str(body.get("name", "")),
            family=str(body.get("familyName", "")),
            vcpus=int(vcpus) if vcpus and vcpus.isdigit() else None,
            low_priority_capable=capabilities.get("LowPriorityCapable", "False").lower() == "true",
        )


class ResourceManager:
    """Reads of ``Microsoft.Batch`` through Resource Manager at ``endpoint``, with a token for ``scope``."""

    def __init__(self, endpoint: str, credential: TokenCredential, scope: str, *, ca_bundle: str | None = None) -> None:
        self.endpoint = endpoint.rstrip("/")
        kwargs: dict[str, Any] = proxy_kwargs(self.endpoint)
        if ca_bundle:
            kwargs["connection_verify"] = ca_bundle
        policies = [
            RequestIdPolicy(),
            HeadersPolicy(),
            UserAgentPolicy(sdk_moniker="airflow-provider-azbatch"),
            # Reads only: a throttled or failing one is repeated a little, then reported.
            RetryPolicy(retry_total=2, retry_backoff_factor=0.5),
            BearerTokenCredentialPolicy(credential, scope),
            NetworkTraceLoggingPolicy(),
        ]
        self._client: PipelineClient[HttpRequest, Any] = PipelineClient(self.endpoint, policies=policies, **kwargs)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ResourceManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads ------------------------------------------------------------------------------------------
    def batch_account(self, subscription_id: str, resource_group: str, account: str) -> BatchAccountInfo:
        path = (
            f"/subscriptions/{quote(subscription_id)}/resourceGroups/{quote(resource_group)}/providers/"
            f"Microsoft.Batch/batchAccounts/{quote(account)}"
        )
        return BatchAccountInfo.from_json(self._get(path))

    def find_batch_account(self, subscription_id: str, account_url: str) -> BatchAccountInfo | None:
        """The subscription's Batch account at ``account_url`` (its endpoint), among those the caller can read."""
        host = urlsplit(account_url).netloc.lower()
        path = f"/subscriptions/{quote(subscription_id)}/providers/Microsoft.Batch/batchAccounts"
        for body in self._pages(path):
            account = BatchAccountInfo.from_json(body)
            if account.endpoint.lower() == host:
                return account
        return None

    def vm_skus(self, subscription_id: str, location: str) -> list[VmSku]:
        path = (
            f"/subscriptions/{quote(subscription_id)}/providers/Microsoft.Batch/locations/{quote(location)}/"
            "virtualMachineSkus"
        )
        return [VmSku.from_json(body) for body in self._pages(path)]

    def resource(self, resource_id: str, api_version: str) -> dict[str, Any]:
        """Any resource Resource Manager serves, by its id (a storage account, a subnet, the caller's permissions)."""
        return self._get(resource_id, api_version)

    def resources(self, path: str, api_version: str) -> Iterator[dict[str, Any]]:
        """The items of a listing, every page."""
        return self._pages(path, api_version)

    # -- plumbing ----------------------------------------------------------------------------------------
    def _pages(self, path: str, api_version: str = API_VERSION) -> Iterator[dict[str, Any]]:
        page: dict[str, Any] | None = self._get(path, api_version)
        while page is not None:
            yield from page.get("value") or []
            link = page.get("nextLink")
            page = self._get_url(link) if link else None

    def _get(self, path: str, api_version: str = API_VERSION) -> dict[str, Any]:
        return self._get_url(f"{self.endpoint}{path}?api-version={api_version}")

    def _get_url(self, url: str) -> dict[str, Any]:
        request = HttpRequest("GET", url, headers={"Accept": "application/json"})
        response = self._client.send_request(request)
        if response.status_code != 200:
            raise _arm_error(response)
        body = response.json()
        return body if isinstance(body, dict) else {}


def _arm_error(response: Any) -> HttpResponseError:
    """ARM's ``{"error": {"code", "message"}}`` as azure-core's exception of the status, its code in ``.error``
    (azure-core's default OData v4 error format is ARM's)."""
    kind = {401: ClientAuthenticationError, 404: ResourceNotFoundError}.get(response.status_code, HttpResponseError)
    return kind(response=response)

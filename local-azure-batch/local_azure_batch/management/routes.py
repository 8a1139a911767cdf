"""The management plane's requests: authentication and authorization as ARM does them, then the answers."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from local_azure_batch.auth.authority import MANAGEMENT_AUDIENCES, TokenAuthority, TokenProblem
from local_azure_batch.model.account import ServiceSettings

from .access import Assignments
from .errors import (
    ArmError,
    account_not_found,
    authorization_failed,
    error_response,
    new_request_id,
    resource_group_not_found,
    subscription_not_found,
    unauthenticated,
)
from .resources import Caller, Resources
from .settings import (
    DEFAULT_ACTIVE_JOB_QUOTA,
    DEFAULT_POOL_QUOTA,
    DEV_STORAGE_ACCOUNT,
    USER_SUBSCRIPTION,
    ManagementSettings,
)
from .skus import families, region_skus

log = logging.getLogger("local_azure_batch")

API_VERSIONS = ("2023-05-01", "2024-02-01", "2024-07-01", "2025-06-01")
_SUB = r"/subscriptions/(?P<sub>[^/]+)"
_RG = r"/resourcegroups/(?P<rg>[^/]+)"
_BATCH = r"/providers/microsoft\.batch"
# ARM matches the fixed segments of a path case-insensitively.
_ACCOUNT = re.compile(f"{_SUB}{_RG}{_BATCH}/batchaccounts/(?P<account>[^/]+)/?", re.IGNORECASE)
_GROUP_ACCOUNTS = re.compile(f"{_SUB}{_RG}{_BATCH}/batchaccounts/?", re.IGNORECASE)
_ACCOUNTS = re.compile(f"{_SUB}{_BATCH}/batchaccounts/?", re.IGNORECASE)
_SKUS = re.compile(f"{_SUB}{_BATCH}/locations/(?P<location>[^/]+)/virtualmachineskus/?", re.IGNORECASE)


@dataclass
class ManagementPlane:
    """The answers of the management plane for one account, from the service's and the management settings."""

    service: ServiceSettings
    settings: ManagementSettings
    authority: TokenAuthority
    url: str
    resources: Resources = field(init=False)

    def __post_init__(self) -> None:
        subscription = self.service.subscription_id or ""
        assignments = Assignments(subscription, self._account_id)
        self.resources = Resources(subscription, self.service.location, assignments)
        # The storage account of the development set-up (Azurite's), as Resource Manager would list it.
        self.resources.seed_storage_account(self.settings.resource_group, DEV_STORAGE_ACCOUNT)

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", "/subscriptions/{tail:.*}", self._dispatch)]

    # -- dispatch -------------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.Response:
        request_id = new_request_id()
        try:
            response = await self._answer(request)
        except ArmError as exc:
            response = error_response(exc, request_id)
        response.headers.setdefault("x-ms-request-id", request_id)
        log.info("%s %s %s (management)", request.method, request.raw_path, response.status)
        return response

    async def _answer(self, request: web.Request) -> web.Response:
        claims = self._authenticate(request)
        if not request.query.get("api-version"):
            raise ArmError(
                400,
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        path = request.path
        handlers: list[tuple[re.Pattern[str], Callable[[dict[str, Any], dict[str, str]], Awaitable[Any]]]] = [
            (_ACCOUNT, self._account),
            (_GROUP_ACCOUNTS, self._group_accounts),
            (_ACCOUNTS, self._accounts),
            (_SKUS, self._skus),
        ]
        for pattern, handler in handlers:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if request.method != "GET":
                raise ArmError(405, "MethodNotAllowed", f"The requested method '{request.method}' is not allowed here.")
            self._check_api_version(request, path)
            return web.json_response(await handler(claims, match.groupdict()))
        if self.resources.serves(path):
            body = await request.json() if request.can_read_body else {}
            status, answer = self.resources.answer(request.method, path, body or {}, self._caller(claims))
            return web.json_response(answer, status=status) if status != 204 else web.Response(status=204)
        raise ArmError(404, "NotFound", f"The resource path '{path}' is not one this local management plane serves.")

    def _check_api_version(self, request: web.Request, path: str) -> None:
        version = request.query["api-version"]
        if version not in API_VERSIONS:
            kind = "locations/virtualMachineSkus" if "/locations/" in path.lower() else "batchAccounts"
            raise ArmError(
                400,
                "NoRegisteredProviderFound",
                f"No registered resource provider found for location '{self.service.location}' and API version "
                f"'{version}' for type '{kind}'. The supported api-versions are '{', '.join(API_VERSIONS)}'.",
            )

    def _authenticate(self, request: web.Request) -> dict[str, Any]:
        authority_uri = f"{self.url}/{self.authority.tenant_id}"
        authorization = request.headers.get("Authorization", "")
        if not authorization:
            raise unauthenticated(
                "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.", authority_uri
            )
        scheme, _, token = authorization.partition(" ")
        if scheme != "Bearer" or not token:
            raise unauthenticated(
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is not of the form 'Bearer <access token>'.",
                authority_uri,
            )
        try:
            return self.authority.decode(token, (*MANAGEMENT_AUDIENCES, f"{self.url}/"))
        except TokenProblem as problem:
            if problem.kind == "expired":
                raise unauthenticated(
                    "ExpiredAuthenticationToken", "The access token has expired.", authority_uri
                ) from None
            if problem.kind == "audience":
                audience = problem.claims.get("aud", "")
                raise unauthenticated(
                    "InvalidAuthenticationTokenAudience",
                    f"The access token has been obtained for wrong audience or resource '{audience}'. It should "
                    f"exactly match with one of the allowed audiences '{', '.join(MANAGEMENT_AUDIENCES)}'.",
                    authority_uri,
                ) from None
            if problem.kind == "tenant":
                raise unauthenticated(
                    "InvalidAuthenticationTokenTenant",
                    f"The access token is from the wrong issuer '{problem.claims.get('iss', '')}'. It must match the "
                    f"tenant '{self.authority.tenant_id}' associated with this subscription. Please use the "
                    f"authority (URL) '{authority_uri}' to get the token.",
                    authority_uri,
                ) from None
            raise unauthenticated("InvalidAuthenticationToken", "The access token is invalid.", authority_uri) from None

    # -- what the principal may read ------------------------------------------------------------------
    def _check_subscription(self, subscription_id: str) -> None:
        if subscription_id.lower() != (self.service.subscription_id or "").lower():
            raise subscription_not_found(subscription_id)

    def _caller(self, claims: dict[str, Any]) -> Caller:
        principal = self.authority.principal(claims)
        roles = principal.roles if principal is not None else frozenset()
        return Caller(str(claims.get("appid", "")), str(claims.get("oid", "")), roles)

    def _authorize(self, claims: dict[str, Any], action: str, resource: str) -> None:
        caller = self._caller(claims)
        if not self.resources.assignments.allowed(caller.object_id, caller.roles, resource, action):
            raise authorization_failed(caller.client_id, caller.object_id, action, resource)

    def _readable(self, claims: dict[str, Any]) -> bool:
        caller = self._caller(claims)
        return self.resources.assignments.allowed(
            caller.object_id, caller.roles, self._account_id, "Microsoft.Batch/batchAccounts/read"
        )

    # -- the resources --------------------------------------------------------------------------------
    @property
    def _account_id(self) -> str:
        return (
            f"/subscriptions/{self.service.subscription_id}/resourceGroups/{self.settings.resource_group}/providers/"
            f"Microsoft.Batch/batchAccounts/{self.service.account_name}"
        )

    async def _account(self, claims: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
        self._check_subscription(params["sub"])
        resource = (
            f"/subscriptions/{params['sub']}/resourceGroups/{params['rg']}/providers/Microsoft.Batch/batchAccounts/"
            f"{params['account']}"
        )
        self._authorize(claims, "Microsoft.Batch/batchAccounts/read", resource)
        if params["rg"].lower() != self.settings.resource_group.lower():
            raise resource_group_not_found(params["rg"])
        if params["account"].lower() != self.service.account_name.lower():
            raise account_not_found(params["account"], params["rg"])
        return self._account_body()

    async def _group_accounts(self, claims: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
        self._check_subscription(params["sub"])
        if params["rg"].lower() != self.settings.resource_group.lower():
            raise resource_group_not_found(params["rg"])
        return {"value": [self._account_body()] if self._readable(claims) else []}

    async def _accounts(self, claims: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
        self._check_subscription(params["sub"])
        # A subscription's list holds the accounts the caller may read.
        return {"value": [self._account_body()] if self._readable(claims) else []}

    async def _skus(self, claims: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
        self._check_subscription(params["sub"])
        resource = f"/subscriptions/{params['sub']}"
        self._authorize(claims, "Microsoft.Batch/locations/virtualMachineSkus/read", resource)
        location = params["location"].lower().replace(" ", "")
        if location != self.service.location.lower():
            # Only the account's region is modelled: a region without it offers nothing here.
            return {"value": []}
        return {"value": region_skus(self.service.unavailable_vm_sizes)}

    def _account_body(self) -> dict[str, Any]:
        settings = self.settings
        properties: dict[str, Any] = {
            "accountEndpoint": urlsplit(self.url).netloc,
            "provisioningState": "Succeeded",
            "poolAllocationMode": settings.pool_allocation_mode,
            "publicNetworkAccess": "Enabled",
            "poolQuota": self.service.pool_quota if self.service.pool_quota is not None else DEFAULT_POOL_QUOTA,
            "activeJobAndJobScheduleQuota": (
                self.service.job_quota if self.service.job_quota is not None else DEFAULT_ACTIVE_JOB_QUOTA
            ),
        }
        # In user subscription mode the cores are the subscription's: the account reports no core quota.
        if settings.pool_allocation_mode != USER_SUBSCRIPTION:
            per_family = [
                {"name": family, "coreQuota": settings.core_quotas.get(family, settings.default_core_quota)}
                for family in families()
            ]
            properties.update(
                {
                    "dedicatedCoreQuota": settings.default_core_quota,
                    "dedicatedCoreQuotaPerVMFamily": per_family,
                    "dedicatedCoreQuotaPerVMFamilyEnforced": True,
                    "lowPriorityCoreQuota": settings.low_priority_core_quota,
                }
            )
        return {
            "id": self._account_id,
            "name": self.service.account_name,
            "type": "Microsoft.Batch/batchAccounts",
            "location": self.service.location,
            "identity": {"type": "None"},
            "properties": properties,
        }

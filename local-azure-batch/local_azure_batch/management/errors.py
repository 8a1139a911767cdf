"""Azure Resource Manager's error answers: ``{"error": {"code", "message"}}`` with the status ARM gives each.

Codes and messages are ARM's own, as clients meet them: ``AuthenticationFailed`` (no Authorization header),
``InvalidAuthenticationToken``, ``ExpiredAuthenticationToken``, ``InvalidAuthenticationTokenAudience``,
``InvalidAuthenticationTokenTenant`` (401), ``AuthorizationFailed`` (403, naming the client, its object id,
the action and the scope), ``SubscriptionNotFound``, ``ResourceGroupNotFound``, ``ResourceNotFound`` (404),
``MissingApiVersionParameter`` and ``NoRegisteredProviderFound`` (400). The exact wording of the token errors is
this service's where no public answer quotes it (documented guess).
"""

from __future__ import annotations

import json
import uuid

from aiohttp import web


class ArmError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def error_response(error: ArmError, request_id: str) -> web.Response:
    body = {"error": {"code": error.code, "message": error.message}}
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "x-ms-request-id": request_id,
        "x-ms-correlation-request-id": request_id,
        **error.headers,
    }
    return web.Response(status=error.status, body=json.dumps(body).encode(), headers=headers)


def new_request_id() -> str:
    return str(uuid.uuid4())


def unauthenticated(code: str, message: str, authority: str) -> ArmError:
    return ArmError(
        401,
        code,
        message,
        {
            "WWW-Authenticate": f'Bearer authorization_uri="{authority}", error="invalid_token", '
            f'error_description="{message}"',
            "x-ms-failure-cause": "gateway",
        },
    )


def authorization_failed(client_id: str, object_id: str, action: str, scope: str) -> ArmError:
    return ArmError(
        403,
        "AuthorizationFailed",
        f"The client '{client_id}' with object id '{object_id}' does not have authorization to perform action "
        f"'{action}' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh "
        "your credentials.",
    )


def subscription_not_found(subscription_id: str) -> ArmError:
    return ArmError(404, "SubscriptionNotFound", f"The subscription '{subscription_id}' could not be found.")


def resource_group_not_found(resource_group: str) -> ArmError:
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{resource_group}' could not be found.")


def account_not_found(account: str, resource_group: str) -> ArmError:
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource 'Microsoft.Batch/batchAccounts/{account}' under resource group '{resource_group}' was not "
        "found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
    )

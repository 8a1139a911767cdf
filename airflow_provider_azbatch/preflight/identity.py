"""Who a connection authenticates as, read from what its credential holds: never printed, only described.

For a shared key that is the Batch account. For Microsoft Entra ID it is the principal the token was issued
to, from the token's claims (``tid`` tenant, ``oid`` object id, ``appid``/``azp`` application, ``upn`` or
``unique_name`` for a user): the names a role assignment needs. The token is decoded, not verified (the
service it is sent to verifies it), and neither it nor any part of it other than these claims leaves here.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings
from airflow_provider_azbatch.preflight.report import Identity

_KINDS = {
    AuthMethod.SERVICE_PRINCIPAL: "service principal",
    AuthMethod.MANAGED_IDENTITY: "managed identity",
    AuthMethod.WORKLOAD_IDENTITY: "workload identity",
    AuthMethod.DEFAULT: "DefaultAzureCredential",
}


def token_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT access token (its middle part); empty when it is not one (an opaque token)."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def shared_key_identity(account_name: str) -> Identity:
    return Identity("shared_key", f"the shared key of Batch account '{account_name}'")


def token_identity(settings: BatchConnectionSettings, claims: dict[str, Any]) -> Identity:
    """The principal a token was issued to, as its claims say (the connection's settings where they do not)."""
    kind = _KINDS.get(settings.auth_method, settings.auth_method.value)
    tenant = _text(claims.get("tid")) or settings.tenant_id
    object_id = _text(claims.get("oid"))
    application = _text(claims.get("appid")) or _text(claims.get("azp")) or settings.client_id
    user = _text(claims.get("upn")) or _text(claims.get("unique_name")) or _text(claims.get("preferred_username"))
    if claims.get("idtyp") == "user" or (user and not claims.get("idtyp")):
        principal_type = "User"
        who = f"user {user or object_id or 'unknown'}"
    else:
        principal_type = "ServicePrincipal"
        who = f"{kind} {application or 'unknown'}"
    parts = [who]
    if object_id:
        parts.append(f"object id {object_id}")
    if tenant:
        parts.append(f"tenant {tenant}")
    return Identity(
        kind=settings.auth_method.value,
        description=", ".join(parts),
        tenant_id=tenant,
        object_id=object_id,
        application_id=application,
        principal_type=principal_type,
    )


def _text(value: Any) -> str | None:
    return str(value) if value else None

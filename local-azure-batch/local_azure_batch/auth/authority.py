"""A local token authority (Microsoft Entra ID's two endpoints that azure-identity needs).

With ``--tls`` the local service also answers, on its own host::

    GET  /{tenant}/v2.0/.well-known/openid-configuration
    POST /{tenant}/oauth2/v2.0/token      (grant_type=client_credentials)

so that azure-identity's real ``ClientSecretCredential`` / ``CertificateCredential`` get tokens
from it (``authority=<service url>``, ``disable_instance_discovery=True``). The Batch endpoints
then accept those tokens. What is checked, in order: the JWT signature (HS256, a secret made at
start, so only tokens from this process pass), expiry, the tenant, and the audience (one of the
Batch resources of the public, US government and China clouds; for the management plane, one of the
Azure Resource Manager resources, or the service's own URL as a custom cloud's ARM audience). Tokens for Azure
Storage are issued too (for a storage emulator such as Azurite with ``--oauth basic``), in the v1 form Entra ID
gives them (issuer ``https://sts.windows.net/<tenant>/``); this service does not accept them.

Tokens carry the claims of Entra ID's app-only v2 tokens that a client reads to say who it is: ``tid``,
``oid`` (the principal's object id), ``azp`` and ``appid`` (its application id), ``idtyp`` ``app``. What a
principal may do is its role assignments (``auth/roles.py``).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from aiohttp import web
from cryptography import x509

from local_azure_batch.auth.roles import RoleAssignment
from local_azure_batch.model.errors import BatchServiceError

BATCH_AUDIENCES = (
    "https://batch.core.windows.net/",
    "https://batch.core.usgovcloudapi.net/",
    "https://batch.chinacloudapi.cn/",
)
# Azure Resource Manager's resources in the public, US government and China clouds (both names of each).
MANAGEMENT_AUDIENCES = (
    "https://management.azure.com/",
    "https://management.core.windows.net/",
    "https://management.usgovcloudapi.net/",
    "https://management.core.usgovcloudapi.net/",
    "https://management.chinacloudapi.cn/",
    "https://management.core.chinacloudapi.cn/",
)
# Azure Storage's resource. Entra ID issues its tokens in the v1 format, issuer https://sts.windows.net/<tenant>/,
# which is what a storage emulator checks (Azurite with --oauth basic: the issuer's prefix and the audience).
STORAGE_AUDIENCES = ("https://storage.azure.com/",)
TOKEN_LIFETIME_SECONDS = 3600


class TokenProblem(Exception):
    """A bearer token this authority does not accept; ``kind``: signature, expired, audience or tenant."""

    def __init__(self, kind: str, detail: str, claims: dict | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.claims = claims or {}


@dataclass
class ServicePrincipal:
    client_id: str
    secret: str | None = None
    certificate_path: Path | None = None
    # The principal's object id in the tenant (the ``oid`` claim; role assignments name it).
    object_id: str = ""
    roles: frozenset[RoleAssignment] = frozenset()

    def certificate_public_key(self):
        if self.certificate_path is None:
            return None
        return x509.load_pem_x509_certificate(self.certificate_path.read_bytes()).public_key()


@dataclass
class TokenAuthority:
    tenant_id: str
    principals: dict[str, ServicePrincipal]
    signing_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    # -- issuing ---------------------------------------------------------------------------------
    def routes(self) -> Iterable[web.RouteDef]:
        return [
            web.get("/{tenant}/v2.0/.well-known/openid-configuration", self._openid_configuration),
            web.post("/{tenant}/oauth2/v2.0/token", self._token),
        ]

    def _base(self, request: web.Request) -> str:
        return f"{request.scheme}://{request.host}"

    async def _openid_configuration(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        if tenant != self.tenant_id:
            return _aad_error(400, "invalid_tenant", f"AADSTS90002: Tenant '{tenant}' not found.")
        base = f"{self._base(request)}/{tenant}"
        return web.json_response(
            {
                "issuer": f"{base}/v2.0",
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
                "jwks_uri": f"{base}/discovery/v2.0/keys",
                "response_types_supported": ["code", "id_token", "token"],
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt"],
                "tenant_region_scope": "local",
            }
        )

    async def _token(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        if tenant != self.tenant_id:
            return _aad_error(400, "invalid_tenant", f"AADSTS90002: Tenant '{tenant}' not found.")
        form = await request.post()
        if form.get("grant_type") != "client_credentials":
            return _aad_error(400, "unsupported_grant_type", "AADSTS70003: Only client_credentials is supported here.")
        client_id = str(form.get("client_id", ""))
        principal = self.principals.get(client_id)
        if principal is None:
            return _aad_error(
                400,
                "unauthorized_client",
                f"AADSTS700016: Application with identifier '{client_id}' was not found in the directory.",
            )
        error = self._check_client_credentials(principal, form, f"{self._base(request)}{request.path}")
        if error is not None:
            return error
        scope = str(form.get("scope", ""))
        audience = scope.split(" ")[0].removesuffix(".default").rstrip("/") + "/"
        known = (*BATCH_AUDIENCES, *MANAGEMENT_AUDIENCES, *STORAGE_AUDIENCES, f"{self._base(request)}/")
        if audience not in known:
            return _aad_error(
                400,
                "invalid_scope",
                f"AADSTS500011: The resource principal named {scope} was not found; "
                f"the local Batch service issues tokens for {', '.join(known)} only.",
            )
        now = int(time.time())
        token = jwt.encode(
            {
                "aud": audience,
                "iss": (
                    f"https://sts.windows.net/{tenant}/"
                    if audience in STORAGE_AUDIENCES
                    else f"{self._base(request)}/{tenant}/v2.0"
                ),
                "tid": tenant,
                "oid": principal.object_id,
                "azp": client_id,
                "appid": client_id,
                "idtyp": "app",
                "sub": principal.object_id or client_id,
                "ver": "2.0",
                "iat": now,
                "nbf": now - 60,
                "exp": now + TOKEN_LIFETIME_SECONDS,
                "jti": str(uuid.uuid4()),
            },
            self.signing_secret,
            algorithm="HS256",
        )
        return web.json_response(
            {
                "token_type": "Bearer",
                "expires_in": TOKEN_LIFETIME_SECONDS,
                "ext_expires_in": TOKEN_LIFETIME_SECONDS,
                "access_token": token,
            }
        )

    def _check_client_credentials(self, principal: ServicePrincipal, form, token_url: str) -> web.Response | None:
        secret = form.get("client_secret")
        assertion = form.get("client_assertion")
        if secret is not None:
            if principal.secret is None or not secrets.compare_digest(str(secret), principal.secret):
                return _aad_error(
                    401,
                    "invalid_client",
                    f"AADSTS7000215: Invalid client secret provided for app '{principal.client_id}'.",
                )
            return None
        if assertion is not None:
            public_key = principal.certificate_public_key()
            if public_key is None:
                return _aad_error(
                    401,
                    "invalid_client",
                    f"AADSTS700027: No certificate is registered for app '{principal.client_id}'.",
                )
            try:
                claims = jwt.decode(
                    str(assertion),
                    public_key,
                    algorithms=["RS256", "PS256", "ES256"],
                    audience=token_url,
                    options={"require": ["exp", "aud", "iss", "sub"]},
                )
            except jwt.PyJWTError as exc:
                return _aad_error(
                    401,
                    "invalid_client",
                    f"AADSTS700027: Client assertion failed signature validation: {exc}",
                )
            if claims.get("iss") != principal.client_id or claims.get("sub") != principal.client_id:
                return _aad_error(401, "invalid_client", "AADSTS700023: Client assertion issuer mismatch.")
            return None
        return _aad_error(
            401,
            "invalid_client",
            "AADSTS7000216: 'client_assertion', 'client_secret' or 'request' is required.",
        )

    # -- checking --------------------------------------------------------------------------------
    def decode(self, token: str, audiences: tuple[str, ...]) -> dict:
        """The token's claims, if this authority signed it for one of ``audiences``, unexpired, for its tenant."""
        try:
            claims = jwt.decode(
                token,
                self.signing_secret,
                algorithms=["HS256"],
                audience=list(audiences),
                options={"require": ["exp", "aud", "tid"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenProblem("expired", "The access token has expired.") from None
        except jwt.InvalidAudienceError:
            unverified = jwt.decode(token, options={"verify_signature": False})
            raise TokenProblem("audience", "The access token has the wrong audience.", unverified) from None
        except jwt.PyJWTError as exc:
            raise TokenProblem("signature", f"The access token is not valid: {exc}.") from None
        if claims.get("tid") != self.tenant_id:
            raise TokenProblem("tenant", "The access token was issued for another tenant.", claims)
        return claims

    def verify_bearer(self, token: str) -> dict:
        """The claims of a token for the Batch data plane, or the service's 401 ``AuthenticationFailed``."""
        try:
            return self.decode(token, BATCH_AUDIENCES)
        except TokenProblem as problem:
            detail = (
                "The access token audience is not an Azure Batch resource."
                if problem.kind == "audience"
                else problem.detail
            )
            raise _token_error(detail) from None

    def principal(self, claims: dict) -> ServicePrincipal | None:
        """The principal a verified token was issued to."""
        return self.principals.get(str(claims.get("appid", "")))


def _token_error(detail: str) -> BatchServiceError:
    return BatchServiceError(
        401,
        "AuthenticationFailed",
        "Server failed to authenticate the request. The access token is missing, invalid or expired.",
        [("AuthenticationErrorDetail", detail)],
        headers={"WWW-Authenticate": 'Bearer authorization_uri="local", error="invalid_token"'},
    )


def _aad_error(status: int, error: str, description: str) -> web.Response:
    return web.json_response(
        {
            "error": error,
            "error_description": description,
            "error_codes": [int(description[6:].split(":")[0])] if description.startswith("AADSTS") else [],
            "trace_id": str(uuid.uuid4()),
            "correlation_id": str(uuid.uuid4()),
        },
        status=status,
    )

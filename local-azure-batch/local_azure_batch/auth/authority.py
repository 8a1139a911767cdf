"""A local token authority (Microsoft Entra ID's two endpoints that azure-identity needs).

With ``--tls`` the local service also answers, on its own host::

    GET  /{tenant}/v2.0/.well-known/openid-configuration
    POST /{tenant}/oauth2/v2.0/token      (grant_type=client_credentials)

so that azure-identity's real ``ClientSecretCredential`` / ``CertificateCredential`` get tokens
from it (``authority=<service url>``, ``disable_instance_discovery=True``). The Batch endpoints
then accept those tokens. What is checked, in order: the JWT signature (HS256, a secret made at
start, so only tokens from this process pass), expiry, the tenant, and the audience (one of the
Batch resources of the public, US government and China clouds).
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

from local_azure_batch.model.errors import BatchServiceError

BATCH_AUDIENCES = (
    "https://batch.core.windows.net/",
    "https://batch.core.usgovcloudapi.net/",
    "https://batch.chinacloudapi.cn/",
)
TOKEN_LIFETIME_SECONDS = 3600


@dataclass
class ServicePrincipal:
    client_id: str
    secret: str | None = None
    certificate_path: Path | None = None

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
        if audience not in BATCH_AUDIENCES:
            return _aad_error(
                400,
                "invalid_scope",
                f"AADSTS500011: The resource principal named {scope} was not found; "
                f"the local Batch service issues tokens for {', '.join(BATCH_AUDIENCES)} only.",
            )
        now = int(time.time())
        token = jwt.encode(
            {
                "aud": audience,
                "iss": f"{self._base(request)}/{tenant}/v2.0",
                "tid": tenant,
                "appid": client_id,
                "sub": client_id,
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
    def verify_bearer(self, token: str) -> dict:
        try:
            claims = jwt.decode(
                token,
                self.signing_secret,
                algorithms=["HS256"],
                audience=list(BATCH_AUDIENCES),
                options={"require": ["exp", "aud", "tid"]},
            )
        except jwt.ExpiredSignatureError:
            raise _token_error("The access token has expired.") from None
        except jwt.InvalidAudienceError:
            raise _token_error("The access token audience is not an Azure Batch resource.") from None
        except jwt.PyJWTError as exc:
            raise _token_error(f"The access token is not valid: {exc}.") from None
        if claims.get("tid") != self.tenant_id:
            raise _token_error("The access token was issued for another tenant.")
        return claims


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

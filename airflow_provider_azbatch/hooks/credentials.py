"""Credential objects for each authentication method, from azure-core and azure-identity.

Nothing here signs requests: shared key goes through the SDK's own policy, tokens through
azure-identity's credentials (their caching, retries and token refresh included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from azure.core.credentials import AzureNamedKeyCredential

from airflow_provider_azbatch.hooks.clouds import CLOUDS
from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings
from airflow_provider_azbatch.hooks.proxies import proxy_kwargs

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

    # What a sync client signs its requests with: the account's shared key, or an Entra ID token credential.
    BatchCredential: TypeAlias = "AzureNamedKeyCredential | TokenCredential"

# The REST API version of azure-batch 15.1, named here because the trigger's hot reads build their own
# requests (see hooks/batch_async.py) and must speak the version the SDK's operations speak.
BATCH_API_VERSION = "2025-06-01"
# AzureAuthorityHosts are bare host names; settings carry them with their scheme.
_PUBLIC_AUTHORITIES = {f"https://{cloud.authority_host}" for cloud in CLOUDS.values()}


def credential_kwargs(settings: BatchConnectionSettings) -> dict[str, Any]:
    """Arguments every identity credential gets: authority and TLS trust."""
    kwargs: dict[str, Any] = {"authority": settings.authority_host}
    if settings.authority_host not in _PUBLIC_AUTHORITIES:
        # A private or sovereign-like authority: do not ask the public cloud to validate it.
        kwargs["disable_instance_discovery"] = True
    if settings.ca_bundle:
        kwargs["connection_verify"] = settings.ca_bundle
    return kwargs


def build_credential(settings: BatchConnectionSettings, *, asynchronous: bool = False) -> Any:
    """The credential for ``BatchClient`` (sync) or ``azure.batch.aio.BatchClient`` (asynchronous)."""
    if settings.auth_method is AuthMethod.SHARED_KEY:
        assert settings.account_name
        assert settings.account_key
        return AzureNamedKeyCredential(settings.account_name, settings.account_key)
    if asynchronous:
        from azure.identity import aio as identity
    else:
        import azure.identity as identity  # type: ignore[no-redef]
    kwargs = credential_kwargs(settings)
    method = settings.auth_method
    if method is AuthMethod.SERVICE_PRINCIPAL:
        # Checked when the settings were read: a service principal has both ids, and a secret or certificate.
        tenant_id, client_id = settings.tenant_id or "", settings.client_id or ""
        if settings.client_certificate_path:
            return identity.CertificateCredential(
                tenant_id,
                client_id,
                certificate_path=settings.client_certificate_path,
                password=settings.client_certificate_password,
                **kwargs,
            )
        return identity.ClientSecretCredential(tenant_id, client_id, settings.client_secret or "", **kwargs)
    if method is AuthMethod.MANAGED_IDENTITY:
        mi_kwargs: dict[str, Any] = {"connection_verify": settings.ca_bundle} if settings.ca_bundle else {}
        return identity.ManagedIdentityCredential(client_id=settings.client_id, **mi_kwargs)
    if method is AuthMethod.WORKLOAD_IDENTITY:
        given = _given(
            tenant_id=settings.tenant_id, client_id=settings.client_id, token_file_path=settings.federated_token_file
        )
        return identity.WorkloadIdentityCredential(**kwargs, **given)
    given = _given(
        managed_identity_client_id=settings.client_id,
        workload_identity_client_id=settings.client_id,
        workload_identity_tenant_id=settings.tenant_id,
        connection_verify=settings.ca_bundle,
    )
    return identity.DefaultAzureCredential(authority=settings.authority_host, **given)


def _given(**values: str | None) -> dict[str, str]:
    """The settings the connection sets (the others are left to the credential's defaults)."""
    return {name: value for name, value in values.items() if value}


def default_credential(settings: BatchConnectionSettings) -> Any:
    """DefaultAzureCredential in the connection's cloud (environment, workload or managed identity, Azure CLI...)."""
    import azure.identity as identity

    return identity.DefaultAzureCredential(**credential_kwargs(settings))


def client_kwargs(settings: BatchConnectionSettings) -> dict[str, Any]:
    """Arguments for the Batch clients: the REST API version, the cloud's token scope, TLS trust and proxy."""
    kwargs: dict[str, Any] = {
        "api_version": BATCH_API_VERSION,
        "credential_scopes": [settings.token_scope],
        **proxy_kwargs(settings.account_url),
    }
    if settings.ca_bundle:
        kwargs["connection_verify"] = settings.ca_bundle
    return kwargs

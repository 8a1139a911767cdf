"""build_credential, credential_kwargs and client_kwargs, with the real azure-identity credential classes.

The arguments each credential got are read back from where azure-identity keeps them.
"""

from __future__ import annotations

import asyncio
import base64
import datetime

import azure.identity
import azure.identity.aio
import pytest
from azure.core.credentials import AzureNamedKeyCredential
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from airflow_provider_azbatch.hooks.credentials import build_credential, client_kwargs, credential_kwargs
from tests.unit.conftest import ACCOUNT_KEY, ACCOUNT_URL, make_settings

pytestmark = pytest.mark.usefixtures("clean_azure_env")

CLOUDS = {
    "public": ("https://login.microsoftonline.com", "https://batch.core.windows.net//.default"),
    "us_government": ("https://login.microsoftonline.us", "https://batch.core.usgovcloudapi.net//.default"),
    "china": ("https://login.chinacloudapi.cn", "https://batch.chinacloudapi.cn//.default"),
}


def _sp(cloud: str = "public", **extra):
    return make_settings(
        {
            "account_url": ACCOUNT_URL,
            "auth_method": "service_principal",
            "tenant_id": "tenant-1",
            "client_id": "client-1",
            "cloud": cloud,
            **extra,
        }
    )


def _transport_verify(pipeline_owner):
    return pipeline_owner._pipeline._transport.connection_config.verify


def _run(coroutine_factory):
    return asyncio.run(coroutine_factory())


@pytest.fixture(scope="module")
def certificate_pem(tmp_path_factory):
    """A self-signed certificate and its encrypted private key in one PEM file, and its SHA-1 fingerprint."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # azure-identity signs with RS256
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "azbatch-unit-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pem-password"),
    ) + cert.public_bytes(serialization.Encoding.PEM)
    path = tmp_path_factory.mktemp("cert") / "sp.pem"
    path.write_bytes(pem)
    return str(path), cert.fingerprint(hashes.SHA1())


# -- shared key ------------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_shared_key(asynchronous):
    settings = make_settings({"account_url": ACCOUNT_URL}, login="acct", password=ACCOUNT_KEY)

    credential = build_credential(settings, asynchronous=asynchronous)

    assert type(credential) is AzureNamedKeyCredential
    assert (credential.named_key.name, credential.named_key.key) == ("acct", ACCOUNT_KEY)


# -- service principal -----------------------------------------------------------------------------


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_service_principal_secret_sync(cloud):
    credential = build_credential(_sp(cloud, client_secret="s3cret"))

    assert type(credential) is azure.identity.ClientSecretCredential
    assert credential._tenant_id == "tenant-1"
    assert credential._client_id == "client-1"
    assert credential._client_credential == "s3cret"
    assert credential._authority == CLOUDS[cloud][0]
    credential.close()


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_service_principal_secret_async(cloud):
    async def scenario():
        credential = build_credential(_sp(cloud, client_secret="s3cret"), asynchronous=True)
        try:
            assert type(credential) is azure.identity.aio.ClientSecretCredential
            assert credential._client._tenant_id == "tenant-1"
            assert credential._client._client_id == "client-1"
            assert credential._secret == "s3cret"
            assert credential._client._authority == CLOUDS[cloud][0]
        finally:
            await credential.close()

    _run(scenario)


def test_service_principal_certificate_sync(certificate_pem):
    path, sha1 = certificate_pem
    settings = _sp("us_government", client_certificate_path=path, client_certificate_password="pem-password")

    credential = build_credential(settings)

    assert type(credential) is azure.identity.CertificateCredential
    assert credential._tenant_id == "tenant-1"
    assert credential._client_id == "client-1"
    assert credential._authority == "https://login.microsoftonline.us"
    assert credential._client_credential["thumbprint"] == sha1.hex()
    # azure-identity 1.26+ keeps the passphrase as given; before, encoded.
    assert credential._client_credential["passphrase"] in ("pem-password", b"pem-password")
    credential.close()


def test_service_principal_certificate_async(certificate_pem):
    path, sha1 = certificate_pem
    settings = _sp("china", client_certificate_path=path, client_certificate_password="pem-password")

    async def scenario():
        credential = build_credential(settings, asynchronous=True)
        try:
            assert type(credential) is azure.identity.aio.CertificateCredential
            assert credential._client._tenant_id == "tenant-1"
            assert credential._client._client_id == "client-1"
            assert credential._client._authority == "https://login.chinacloudapi.cn"
            assert credential._certificate._thumbprint == base64.urlsafe_b64encode(sha1).decode()
        finally:
            await credential.close()

    _run(scenario)


def test_certificate_is_preferred_over_a_secret(certificate_pem):
    path, _ = certificate_pem
    settings = _sp(client_secret="s3cret", client_certificate_path=path, client_certificate_password="pem-password")

    credential = build_credential(settings)

    assert type(credential) is azure.identity.CertificateCredential
    credential.close()


def test_wrong_certificate_password_fails_when_the_credential_is_built(certificate_pem):
    path, _ = certificate_pem
    settings = _sp(client_certificate_path=path, client_certificate_password="wrong")

    # The words are cryptography's: "Incorrect password" from 45 on, "Could not deserialize key data" before.
    with pytest.raises(ValueError, match=r"Incorrect password|Could not deserialize key data"):
        build_credential(settings)


def test_custom_authority_disables_instance_discovery_and_ca_bundle_is_trusted():
    settings = _sp(
        "custom",
        client_secret="s3cret",
        authority_host="https://login.local:8443",
        token_scope="https://batch.local//.default",
        ca_bundle="/etc/local-ca.pem",
    )

    assert credential_kwargs(settings) == {
        "authority": "https://login.local:8443",
        "disable_instance_discovery": True,
        "connection_verify": "/etc/local-ca.pem",
    }
    credential = build_credential(settings)
    assert credential._authority == "https://login.local:8443"
    assert credential._instance_discovery is False
    assert _transport_verify(credential._client) == "/etc/local-ca.pem"
    credential.close()


def test_ca_bundle_reaches_the_async_service_principal_transport():
    settings = _sp(client_secret="s3cret", ca_bundle="/etc/local-ca.pem")

    async def scenario():
        credential = build_credential(settings, asynchronous=True)
        try:
            assert _transport_verify(credential._client) == "/etc/local-ca.pem"
        finally:
            await credential.close()

    _run(scenario)


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_public_clouds_keep_instance_discovery(cloud):
    settings = _sp(cloud, client_secret="s3cret")

    assert credential_kwargs(settings) == {"authority": CLOUDS[cloud][0]}
    credential = build_credential(settings)
    assert credential._instance_discovery is None
    credential.close()


# -- managed identity ------------------------------------------------------------------------------


def _mi(**extra):
    return make_settings({"account_url": ACCOUNT_URL, "auth_method": "managed_identity", **extra})


def test_managed_identity_sync_user_assigned():
    credential = build_credential(_mi(client_id="mi-client", ca_bundle="/etc/ca.pem", cloud="china"))

    assert type(credential) is azure.identity.ManagedIdentityCredential
    imds = credential._credential
    assert type(imds).__name__ == "ImdsCredential"
    assert imds._config == {"client_id": "mi-client", "identity_config": None, "connection_verify": "/etc/ca.pem"}
    credential.close()


def test_managed_identity_sync_system_assigned():
    credential = build_credential(_mi())

    assert type(credential) is azure.identity.ManagedIdentityCredential
    assert credential._credential._config == {"client_id": None, "identity_config": None}
    credential.close()


@pytest.mark.parametrize(("client_id", "identity_config"), [("mi-client", {"client_id": "mi-client"}), (None, {})])
def test_managed_identity_async(client_id, identity_config):
    settings = _mi(client_id=client_id) if client_id else _mi()

    async def scenario():
        credential = build_credential(settings, asynchronous=True)
        try:
            assert type(credential) is azure.identity.aio.ManagedIdentityCredential
            assert type(credential._credential).__name__ == "ImdsCredential"
            assert credential._credential._client._identity_config == identity_config
        finally:
            await credential.close()

    _run(scenario)


# -- workload identity -----------------------------------------------------------------------------


def _wi(**extra):
    return make_settings({"account_url": ACCOUNT_URL, "auth_method": "workload_identity", **extra})


@pytest.mark.parametrize("asynchronous", [False, True])
def test_workload_identity_from_the_connection(asynchronous):
    settings = _wi(
        tenant_id="wi-tenant", client_id="wi-client", federated_token_file="/var/run/token", cloud="us_government"
    )

    async def scenario():
        credential = build_credential(settings, asynchronous=asynchronous)
        try:
            module = azure.identity.aio if asynchronous else azure.identity
            assert type(credential) is module.WorkloadIdentityCredential
            assert credential._token_file_path == "/var/run/token"
            assert credential._client._tenant_id == "wi-tenant"
            assert credential._client._client_id == "wi-client"
            assert credential._client._authority == "https://login.microsoftonline.us"
        finally:
            result = credential.close()
            if asynchronous:
                await result

    _run(scenario)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_workload_identity_from_the_environment(asynchronous, clean_azure_env, tmp_path):
    token = tmp_path / "token"
    clean_azure_env.setenv("AZURE_TENANT_ID", "env-tenant")
    clean_azure_env.setenv("AZURE_CLIENT_ID", "env-client")
    clean_azure_env.setenv("AZURE_FEDERATED_TOKEN_FILE", str(token))

    async def scenario():
        credential = build_credential(_wi(), asynchronous=asynchronous)
        try:
            assert credential._token_file_path == str(token)
            assert credential._client._tenant_id == "env-tenant"
            assert credential._client._client_id == "env-client"
            assert credential._client._authority == "https://login.microsoftonline.com"
        finally:
            result = credential.close()
            if asynchronous:
                await result

    _run(scenario)


# -- default ---------------------------------------------------------------------------------------


def _by_type(credential, name):
    found = [c for c in credential.credentials if type(c).__name__ == name]
    assert len(found) == 1, [type(c).__name__ for c in credential.credentials]
    return found[0]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_default_credential_gets_ids_authority_and_ca_bundle(asynchronous, clean_azure_env, tmp_path):
    # Environment variables let the chain build its environment and workload identity members, whose
    # arguments show what DefaultAzureCredential was given.
    clean_azure_env.setenv("AZURE_TENANT_ID", "env-tenant")
    clean_azure_env.setenv("AZURE_CLIENT_ID", "env-client")
    clean_azure_env.setenv("AZURE_CLIENT_SECRET", "env-secret")
    clean_azure_env.setenv("AZURE_FEDERATED_TOKEN_FILE", str(tmp_path / "token"))
    settings = make_settings(
        {
            "account_url": ACCOUNT_URL,
            "tenant_id": "conn-tenant",
            "client_id": "conn-client",
            "cloud": "us_government",
            "ca_bundle": "/etc/ca.pem",
        }
    )

    async def scenario():
        credential = build_credential(settings, asynchronous=asynchronous)
        try:
            module = azure.identity.aio if asynchronous else azure.identity
            assert type(credential) is module.DefaultAzureCredential
            environment = _by_type(credential, "EnvironmentCredential")._credential
            assert type(environment) is module.ClientSecretCredential
            authority = environment._client._authority if asynchronous else environment._authority
            assert authority == "https://login.microsoftonline.us"
            assert _transport_verify(environment._client) == "/etc/ca.pem"
            workload = _by_type(credential, "WorkloadIdentityCredential")
            assert (workload._client._tenant_id, workload._client._client_id) == ("conn-tenant", "conn-client")
            managed = _by_type(credential, "ManagedIdentityCredential")._credential
            if asynchronous:
                assert managed._client._identity_config == {"client_id": "conn-client"}
            else:
                assert managed._config["client_id"] == "conn-client"
                assert managed._config["connection_verify"] == "/etc/ca.pem"
        finally:
            result = credential.close()
            if asynchronous:
                await result

    _run(scenario)


def test_default_credential_leaves_ids_to_the_environment(clean_azure_env):
    clean_azure_env.setenv("AZURE_CLIENT_ID", "env-client")

    credential = build_credential(make_settings({"account_url": ACCOUNT_URL}))

    assert type(credential) is azure.identity.DefaultAzureCredential
    assert _by_type(credential, "ManagedIdentityCredential")._credential._config["client_id"] == "env-client"
    credential.close()


# -- client_kwargs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_client_kwargs_scope_per_cloud(cloud):
    settings = make_settings({"account_url": ACCOUNT_URL, "cloud": cloud}, login="acct", password=ACCOUNT_KEY)

    assert client_kwargs(settings) == {
        "api_version": "2025-06-01",
        "credential_scopes": [CLOUDS[cloud][1]],
        "use_env_settings": False,
    }


def test_client_kwargs_custom_scope_and_ca_bundle():
    settings = make_settings(
        {
            "account_url": ACCOUNT_URL,
            "cloud": "custom",
            "authority_host": "https://login.local",
            "token_scope": "https://batch.local//.default",
            "ca_bundle": "/etc/ca.pem",
        },
        login="acct",
        password=ACCOUNT_KEY,
    )

    assert client_kwargs(settings) == {
        "api_version": "2025-06-01",
        "credential_scopes": ["https://batch.local//.default"],
        "use_env_settings": False,
        "connection_verify": "/etc/ca.pem",
    }

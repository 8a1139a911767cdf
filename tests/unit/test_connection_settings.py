"""BatchConnectionSettings.from_connection: what an azbatch connection means, and every error it gives."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.hooks.clouds import AzureCloud
from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings, ConnectionConfigError
from tests.unit.conftest import ACCOUNT_KEY, ACCOUNT_URL, make_connection, make_settings

SP = {"account_url": ACCOUNT_URL, "auth_method": "service_principal"}


def _error(extra=None, **kwargs) -> ConnectionConfigError:
    with pytest.raises(ConnectionConfigError) as info:
        make_settings(extra, **kwargs)
    return info.value


# -- account_url -----------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [None, {}, {"account_url": ""}, {"account_url": "   "}])
def test_missing_account_url(extra):
    error = _error(extra, login="acct", password=ACCOUNT_KEY)

    assert str(error) == (
        "Connection 'azbatch_test': account_url is missing: set the Batch account URL, "
        "e.g. https://<account>.<region>.batch.azure.com"
    )
    assert error.conn_id == "azbatch_test"
    assert error.field_name == "account_url"
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    "url",
    [
        "myaccount.westeurope.batch.azure.com",
        "ftp://myaccount.westeurope.batch.azure.com",
        "https://",
        "https:///path-only",
    ],
)
def test_malformed_account_url(url):
    error = _error({"account_url": url}, login="acct", password=ACCOUNT_KEY)

    assert str(error) == (
        f"Connection 'azbatch_test': account_url is not a valid URL ({url!r}): "
        "it must look like https://<account>.<region>.batch.azure.com"
    )
    assert error.field_name == "account_url"


@pytest.mark.parametrize(
    "url",
    [
        f"{ACCOUNT_URL}/jobs",
        f"{ACCOUNT_URL}/jobs/",
        f"{ACCOUNT_URL}?api-version=2024-07-01",
        f"{ACCOUNT_URL}/?x=1",
    ],
)
def test_account_url_with_path_or_query(url):
    error = _error({"account_url": url}, login="acct", password=ACCOUNT_KEY)

    assert str(error) == (
        f"Connection 'azbatch_test': account_url must be the account endpoint only, without a path or query ({url!r})"
    )
    assert error.field_name == "account_url"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (ACCOUNT_URL, ACCOUNT_URL),
        (f"{ACCOUNT_URL}/", ACCOUNT_URL),
        (f"  {ACCOUNT_URL}/  ", ACCOUNT_URL),
        ("HTTPS://MyAccount.westeurope.batch.azure.com", "https://MyAccount.westeurope.batch.azure.com"),
        ("https://localhost:8443/", "https://localhost:8443"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ],
)
def test_account_url_is_normalised_to_the_endpoint(url, expected):
    settings = make_settings({"account_url": url}, login="acct", password=ACCOUNT_KEY)

    assert settings.account_url == expected


def test_account_url_falls_back_to_host_and_extra_wins_over_host():
    from_host = make_settings(None, host=f"{ACCOUNT_URL}/", login="acct", password=ACCOUNT_KEY)
    both = make_settings(
        {"account_url": "https://other.eastus.batch.azure.com"}, host=ACCOUNT_URL, login="acct", password=ACCOUNT_KEY
    )

    assert from_host.account_url == ACCOUNT_URL
    assert both.account_url == "https://other.eastus.batch.azure.com"


# -- auth method -----------------------------------------------------------------------------------


def test_auth_method_is_shared_key_when_a_key_is_set():
    settings = make_settings({"account_url": ACCOUNT_URL}, login="acct", password=ACCOUNT_KEY)

    assert settings.auth_method is AuthMethod.SHARED_KEY
    assert settings.account_name == "acct"
    assert settings.account_key == ACCOUNT_KEY
    assert settings.secrets == [ACCOUNT_KEY]


@pytest.mark.parametrize("password", [None, ""])
def test_auth_method_is_default_without_a_key(password):
    settings = make_settings({"account_url": ACCOUNT_URL}, password=password)

    assert settings.auth_method is AuthMethod.DEFAULT
    assert settings.account_key is None
    assert settings.account_name is None
    assert settings.secrets == []


def test_explicit_auth_method_wins_over_the_key_and_ignores_case():
    settings = make_settings(
        {**SP, "auth_method": " Service_Principal ", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
        login="acct",
        password=ACCOUNT_KEY,
    )

    assert settings.auth_method is AuthMethod.SERVICE_PRINCIPAL


@pytest.mark.parametrize("method", ["oauth", "sharedkey", "msi"])
def test_unknown_auth_method(method):
    error = _error({"account_url": ACCOUNT_URL, "auth_method": method})

    assert str(error) == (
        f"Connection 'azbatch_test': auth_method is {method!r}; "
        "use one of: auto, shared_key, service_principal, managed_identity, workload_identity, default"
    )
    assert error.field_name == "auth_method"


# -- shared key ------------------------------------------------------------------------------------


def test_shared_key_without_login():
    error = _error({"account_url": ACCOUNT_URL}, password=ACCOUNT_KEY)

    assert str(error) == (
        "Connection 'azbatch_test': login (Batch account name) is missing: shared_key authentication needs it"
    )
    assert error.field_name == "login"


def test_shared_key_without_password():
    error = _error({"account_url": ACCOUNT_URL, "auth_method": "shared_key"}, login="acct")

    assert str(error) == (
        "Connection 'azbatch_test': password (Batch account key) is missing: shared_key authentication needs it"
    )
    assert error.field_name == "password"


@pytest.mark.parametrize("key", ["not base64!", "abc", "a2V5\n", "a2V5====x"])
def test_shared_key_that_is_not_base64(key):
    error = _error({"account_url": ACCOUNT_URL}, login="acct", password=key)

    assert str(error) == (
        "Connection 'azbatch_test': password (Batch account key) is not base64: "
        "paste the key as the Azure portal shows it"
    )
    assert error.field_name == "password"
    assert key not in str(error)


def test_shared_key_may_use_http_for_the_local_service():
    settings = make_settings({"account_url": "http://127.0.0.1:8080"}, login="acct", password=ACCOUNT_KEY)

    assert settings.auth_method is AuthMethod.SHARED_KEY
    assert settings.account_url == "http://127.0.0.1:8080"


# -- token authentication --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "method"),
    [
        ({}, "default"),
        ({"auth_method": "managed_identity"}, "managed_identity"),
        ({"auth_method": "workload_identity"}, "workload_identity"),
        (
            {"auth_method": "service_principal", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
            "service_principal",
        ),
    ],
)
def test_http_with_token_authentication(extra, method):
    error = _error({"account_url": "http://127.0.0.1:8080", **extra})

    assert str(error) == (
        f"Connection 'azbatch_test': account_url uses http: {method} sends bearer tokens, which need https "
        "(for the local Batch service, start it with --tls and set ca_bundle)"
    )
    assert error.field_name == "account_url"


@pytest.mark.parametrize(
    ("extra", "field_name", "message"),
    [
        (
            {"client_id": "c", "client_secret": "s"},
            "tenant_id",
            "tenant_id is missing: service_principal authentication needs the tenant",
        ),
        (
            {"tenant_id": "  ", "client_id": "c", "client_secret": "s"},
            "tenant_id",
            "tenant_id is missing: service_principal authentication needs the tenant",
        ),
        (
            {"tenant_id": "t", "client_secret": "s"},
            "client_id",
            "client_id is missing: service_principal authentication needs the application id",
        ),
        (
            {"tenant_id": "t", "client_id": "c"},
            "client_secret",
            "client_secret is missing: service_principal authentication needs client_secret or client_certificate_path",
        ),
        (
            {"tenant_id": "t", "client_id": "c", "client_secret": "", "client_certificate_path": " "},
            "client_secret",
            "client_secret is missing: service_principal authentication needs client_secret or client_certificate_path",
        ),
    ],
)
def test_service_principal_missing_fields(extra, field_name, message):
    error = _error({**SP, **extra})

    assert str(error) == f"Connection 'azbatch_test': {message}"
    assert error.field_name == field_name


def test_service_principal_with_secret_or_certificate():
    secret = make_settings({**SP, "tenant_id": " t ", "client_id": "c", "client_secret": "s3cret"})
    certificate = make_settings(
        {
            **SP,
            "tenant_id": "t",
            "client_id": "c",
            "client_certificate_path": "/certs/sp.pem",
            "client_certificate_password": "pem-pass",
        }
    )

    assert (secret.tenant_id, secret.client_id, secret.client_secret) == ("t", "c", "s3cret")
    assert secret.secrets == ["s3cret"]
    assert (certificate.client_certificate_path, certificate.client_certificate_password) == (
        "/certs/sp.pem",
        "pem-pass",
    )
    assert certificate.client_secret is None
    assert certificate.secrets == ["pem-pass"]


def test_managed_and_workload_identity_need_no_other_fields():
    managed = make_settings({"account_url": ACCOUNT_URL, "auth_method": "managed_identity"})
    workload = make_settings({"account_url": ACCOUNT_URL, "auth_method": "workload_identity"})

    assert managed.auth_method is AuthMethod.MANAGED_IDENTITY
    assert workload.auth_method is AuthMethod.WORKLOAD_IDENTITY
    assert (workload.tenant_id, workload.client_id, workload.federated_token_file) == (None, None, None)


# -- clouds ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cloud", "scope", "authority", "portal", "manager"),
    [
        (
            None,
            "https://batch.core.windows.net//.default",
            "https://login.microsoftonline.com",
            "https://portal.azure.com",
            "https://management.azure.com",
        ),
        (
            "public",
            "https://batch.core.windows.net//.default",
            "https://login.microsoftonline.com",
            "https://portal.azure.com",
            "https://management.azure.com",
        ),
        (
            "us_government",
            "https://batch.core.usgovcloudapi.net//.default",
            "https://login.microsoftonline.us",
            "https://portal.azure.us",
            "https://management.usgovcloudapi.net",
        ),
        (
            "China",
            "https://batch.chinacloudapi.cn//.default",
            "https://login.chinacloudapi.cn",
            "https://portal.azure.cn",
            "https://management.chinacloudapi.cn",
        ),
    ],
)
def test_clouds(cloud, scope, authority, portal, manager):
    extra = {"account_url": ACCOUNT_URL}
    if cloud is not None:
        extra["cloud"] = cloud

    settings = make_settings(extra, login="acct", password=ACCOUNT_KEY)

    assert settings.cloud == AzureCloud((cloud or "public").lower(), scope, authority, portal, manager)
    assert settings.cloud.resource_manager_scope == f"{manager}/.default"
    assert settings.token_scope == scope
    assert settings.authority_host == authority


def test_cloud_overrides():
    settings = make_settings(
        {
            "account_url": ACCOUNT_URL,
            "cloud": "us_government",
            "authority_host": "login.gov.example",
            "token_scope": "https://batch.gov.example//.default",
        },
        login="acct",
        password=ACCOUNT_KEY,
    )
    only_authority = make_settings(
        {"account_url": ACCOUNT_URL, "authority_host": "https://login.local:8443"}, login="acct", password=ACCOUNT_KEY
    )

    assert settings.cloud == AzureCloud(
        "us_government",
        "https://batch.gov.example//.default",
        "https://login.gov.example",
        "https://portal.azure.us",
        "https://management.usgovcloudapi.net",
    )
    assert only_authority.cloud == AzureCloud(
        "public",
        "https://batch.core.windows.net//.default",
        "https://login.local:8443",
        "https://portal.azure.com",
        "https://management.azure.com",
    )


def test_custom_cloud():
    settings = make_settings(
        {
            "account_url": ACCOUNT_URL,
            "cloud": "custom",
            "authority_host": "https://login.example",
            "token_scope": "https://batch.example//.default",
        },
        login="acct",
        password=ACCOUNT_KEY,
    )

    assert settings.cloud == AzureCloud("custom", "https://batch.example//.default", "https://login.example", "")
    # No Resource Manager known: the preflight check says it cannot read the quotas, and why.
    assert settings.cloud.resource_manager_scope == ""


def test_resource_manager_override():
    settings = make_settings(
        {
            "account_url": ACCOUNT_URL,
            "cloud": "custom",
            "authority_host": "https://login.example",
            "token_scope": "https://batch.example//.default",
            "resource_manager_url": "https://arm.example/",
        },
        login="acct",
        password=ACCOUNT_KEY,
    )

    assert settings.cloud.resource_manager_url == "https://arm.example"
    assert settings.cloud.resource_manager_scope == "https://arm.example/.default"
    with pytest.raises(ConnectionConfigError, match="resource_manager_url must be an https endpoint without a path"):
        make_settings(
            {"account_url": ACCOUNT_URL, "resource_manager_url": "http://arm.example/x"},
            login="acct",
            password=ACCOUNT_KEY,
        )


@pytest.mark.parametrize(
    "overrides",
    [{}, {"authority_host": "https://login.example"}, {"token_scope": "https://batch.example//.default"}],
)
def test_custom_cloud_without_both_overrides(overrides):
    error = _error({"account_url": ACCOUNT_URL, "cloud": "custom", **overrides}, login="acct", password=ACCOUNT_KEY)

    assert str(error) == (
        "Connection 'azbatch_test': cloud is custom: set both authority_host (e.g. https://login.example) "
        "and token_scope (e.g. https://batch.example//.default)"
    )
    assert error.field_name == "cloud"


@pytest.mark.parametrize(("cloud", "shown"), [("azure_germany", "azure_germany"), ("Mars", "mars")])
def test_unknown_cloud(cloud, shown):
    error = _error({"account_url": ACCOUNT_URL, "cloud": cloud}, login="acct", password=ACCOUNT_KEY)

    assert str(error) == f"Connection 'azbatch_test': cloud is {shown!r}; use public, us_government, china or custom"
    assert error.field_name == "cloud"


def test_http_authority_host_is_rejected():
    with pytest.raises(ConnectionConfigError) as info:
        make_settings(
            {"account_url": ACCOUNT_URL, "auth_method": "managed_identity", "authority_host": "http://login.local"}
        )

    assert info.value.field_name == "authority_host"
    assert str(info.value).endswith(
        "authority_host must use https ('http://login.local'): token authorities are https only"
    )


# -- extras ----------------------------------------------------------------------------------------


def test_all_extras_are_read_and_stripped():
    settings = make_settings(
        {
            "account_url": ACCOUNT_URL,
            "auth_method": "workload_identity",
            "tenant_id": " tenant ",
            "client_id": "client",
            "federated_token_file": "/var/run/token",
            "ca_bundle": "/etc/ca.pem",
            "subscription_id": "sub",
            "resource_group": "rg",
            "client_certificate_path": "",
        }
    )

    assert settings == BatchConnectionSettings(
        conn_id="azbatch_test",
        account_url=ACCOUNT_URL,
        auth_method=AuthMethod.WORKLOAD_IDENTITY,
        cloud=AzureCloud(
            "public",
            "https://batch.core.windows.net//.default",
            "https://login.microsoftonline.com",
            "https://portal.azure.com",
            "https://management.azure.com",
        ),
        tenant_id="tenant",
        client_id="client",
        federated_token_file="/var/run/token",
        ca_bundle="/etc/ca.pem",
        subscription_id="sub",
        resource_group="rg",
    )


def test_prefixed_extras_from_older_uis():
    settings = make_settings(
        {
            "extra__azbatch__account_url": ACCOUNT_URL,
            "extra__azbatch__auth_method": "service_principal",
            "extra__azbatch__tenant_id": "t",
            "extra__azbatch__client_id": "prefixed-client",
            "client_id": "plain-client",
            "extra__azbatch__client_secret": "s",
            "extra__azbatch__cloud": "china",
        }
    )

    assert settings.account_url == ACCOUNT_URL
    assert settings.auth_method is AuthMethod.SERVICE_PRINCIPAL
    assert settings.tenant_id == "t"
    assert settings.client_id == "plain-client"  # the unprefixed field wins
    assert settings.client_secret == "s"
    assert settings.cloud.name == "china"


def test_other_connection_types_prefixes_are_ignored():
    error = _error({"extra__azure_batch__account_url": ACCOUNT_URL}, login="acct", password=ACCOUNT_KEY)

    assert error.field_name == "account_url"


def test_secrets_are_not_in_repr():
    shared = make_settings({"account_url": ACCOUNT_URL}, login="acct", password=ACCOUNT_KEY)
    sp = make_settings(
        {
            **SP,
            "tenant_id": "t",
            "client_id": "c",
            "client_secret": "sp-secret-value",
            "client_certificate_path": "/c.pem",
            "client_certificate_password": "pem-password-value",
        }
    )

    for settings, secrets in ((shared, [ACCOUNT_KEY]), (sp, ["sp-secret-value", "pem-password-value"])):
        assert settings.secrets == secrets
        for text in (repr(settings), str(settings)):
            for secret in secrets:
                assert secret not in text
    assert "account_name='acct'" in repr(shared)
    assert "client_id='c'" in repr(sp)


def test_settings_are_frozen():
    settings = make_settings({"account_url": ACCOUNT_URL}, login="acct", password=ACCOUNT_KEY)

    with pytest.raises(AttributeError):
        settings.account_key = "other"  # type: ignore[misc]


def test_connection_helper_builds_a_real_airflow_connection():
    conn = make_connection({"account_url": ACCOUNT_URL}, login="acct", password=ACCOUNT_KEY)

    assert conn.conn_type == "azbatch"
    assert conn.extra_dejson == {"account_url": ACCOUNT_URL}

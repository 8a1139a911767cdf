"""What an ``azbatch`` connection holds, read and checked once, with errors that say what to fix."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_provider_azbatch import config
from airflow_provider_azbatch.compat import AirflowNotFoundException, BaseHook
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.hooks.clouds import CLOUDS, AzureCloud

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import ConnectionFields


class AuthMethod(str, Enum):
    SHARED_KEY = "shared_key"
    SERVICE_PRINCIPAL = "service_principal"
    MANAGED_IDENTITY = "managed_identity"
    WORKLOAD_IDENTITY = "workload_identity"
    DEFAULT = "default"


class ConnectionConfigError(AzureBatchValidationError):
    """A connection field is missing or malformed; the message names the connection, the field and the fix."""

    def __init__(self, conn_id: str, field_name: str, problem: str) -> None:
        super().__init__(f"Connection '{conn_id}': {field_name}", problem)
        self.conn_id = conn_id
        self.field_name = field_name


# What an ``azbatch`` connection's extras may hold (``extra__azbatch__<name>`` too).
EXTRA_FIELDS = (
    "account_url",
    "auth_method",
    "cloud",
    "authority_host",
    "token_scope",
    "resource_manager_url",
    "tenant_id",
    "client_id",
    "client_secret",
    "client_certificate_path",
    "client_certificate_password",
    "federated_token_file",
    "ca_bundle",
    "subscription_id",
    "resource_group",
    "storage_account_url",
    "storage_account_key",
)


def connection_not_defined(conn_id: str) -> str:
    """How to create the connection ``conn_id`` that Airflow could not find."""
    return (
        f"Connection '{conn_id}' is not defined. Create it with `airflow connections add {conn_id} --conn-type "
        "azbatch --conn-host https://<account>.<region>.batch.azure.com --conn-login <account> --conn-password "
        "<key>` (or in the UI, Admin > Connections), or set the environment variable "
        f"AIRFLOW_CONN_{conn_id.upper()} to the connection as JSON "
        '(\'{"conn_type": "azbatch", "host": "https://...", "login": "<account>", "password": "<key>"}\')'
    )


class ConnectionNotDefinedError(AirflowNotFoundException):
    """Airflow has no connection of this id; the message says how to create one."""

    def __init__(self, conn_id: str) -> None:
        super().__init__(connection_not_defined(conn_id))
        self.conn_id = conn_id


@dataclass(frozen=True)
class BatchConnectionSettings:
    conn_id: str
    account_url: str
    auth_method: AuthMethod
    cloud: AzureCloud
    account_name: str | None = None
    account_key: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_certificate_path: str | None = None
    client_certificate_password: str | None = field(default=None, repr=False)
    federated_token_file: str | None = None
    ca_bundle: str | None = None
    subscription_id: str | None = None
    resource_group: str | None = None
    storage_account_url: str | None = None
    storage_account_key: str | None = field(default=None, repr=False)

    @property
    def token_scope(self) -> str:
        return self.cloud.batch_scope

    @property
    def authority_host(self) -> str:
        return self.cloud.authority_host

    @property
    def secrets(self) -> list[str]:
        candidates = (self.account_key, self.client_secret, self.client_certificate_password, self.storage_account_key)
        return [s for s in candidates if s]

    def credentials_hint(self) -> str:
        """What to check when the service refuses this connection's credentials."""
        return {
            AuthMethod.SHARED_KEY: "check login (the Batch account name) and password (one of the account's keys: "
            "Azure portal, Batch account, Keys)",
            AuthMethod.SERVICE_PRINCIPAL: "check tenant_id, client_id and client_secret (or the certificate), and "
            "that the service principal has a role on the Batch account (e.g. Azure Batch Data Contributor)",
            AuthMethod.MANAGED_IDENTITY: "check that the managed identity (client_id, if set) is assigned to this "
            "machine and has a role on the Batch account",
            AuthMethod.WORKLOAD_IDENTITY: "check tenant_id, client_id and the federated token file, and that the "
            "identity has a role on the Batch account",
            AuthMethod.DEFAULT: "check the credential DefaultAzureCredential picked (its message says which) and "
            "that it has a role on the Batch account",
        }[self.auth_method]

    @classmethod
    def from_connection(cls, conn: ConnectionFields) -> BatchConnectionSettings:
        fields = _Fields(conn.conn_id, _extras(conn))
        key = conn.password or None
        get = fields.get
        settings = cls(
            conn_id=conn.conn_id,
            account_url=_account_url(get("account_url") or (conn.host or None), fields.fail),
            auth_method=_auth_method(get("auth_method"), key, fields.fail),
            cloud=_cloud(fields),
            account_name=conn.login or None,
            account_key=key,
            tenant_id=get("tenant_id"),
            client_id=get("client_id"),
            client_secret=get("client_secret"),
            client_certificate_path=get("client_certificate_path"),
            client_certificate_password=get("client_certificate_password"),
            federated_token_file=get("federated_token_file"),
            ca_bundle=get("ca_bundle"),
            subscription_id=get("subscription_id"),
            resource_group=get("resource_group"),
            storage_account_url=get("storage_account_url"),
            storage_account_key=get("storage_account_key"),
        )
        settings._check(fields.fail)
        return settings

    def _check(self, fail: Any) -> None:
        if self.storage_account_url:
            storage = urlsplit(self.storage_account_url)
            if storage.scheme not in ("https", "http") or not storage.hostname:
                raise fail(
                    "storage_account_url",
                    f"is not a valid URL ({self.storage_account_url!r}): it must look like "
                    "https://<account>.blob.core.windows.net",
                )
        if self.storage_account_key:
            try:
                base64.b64decode(self.storage_account_key, validate=True)
            except (binascii.Error, ValueError):
                raise fail("storage_account_key", "is not base64: paste the key as the Azure portal shows it") from None
        if self.auth_method is AuthMethod.SHARED_KEY:
            if not self.account_name:
                raise fail("login", "(Batch account name) is missing: shared_key authentication needs it")
            if not self.account_key:
                raise fail("password", "(Batch account key) is missing: shared_key authentication needs it")
            try:
                base64.b64decode(self.account_key, validate=True)
            except (binascii.Error, ValueError):
                raise fail(
                    "password", "(Batch account key) is not base64: paste the key as the Azure portal shows it"
                ) from None
            return
        if self.account_url.startswith("http://"):
            raise fail(
                "account_url",
                f"uses http: {self.auth_method.value} sends bearer tokens, which need https "
                "(for the local Batch service, start it with --tls and set ca_bundle)",
            )
        if self.auth_method is AuthMethod.SERVICE_PRINCIPAL:
            if not self.tenant_id:
                raise fail("tenant_id", "is missing: service_principal authentication needs the tenant")
            if not self.client_id:
                raise fail("client_id", "is missing: service_principal authentication needs the application id")
            if not self.client_secret and not self.client_certificate_path:
                raise fail(
                    "client_secret",
                    "is missing: service_principal authentication needs client_secret or client_certificate_path",
                )


class AzbatchHookBase(BaseHook):
    """What both Batch hooks (sync and async) are to Airflow: hooks of an ``azbatch`` connection.

    :param azbatch_conn_id: the connection; default ``[azbatch] default_conn_id`` (``azbatch_default``).
    """

    conn_name_attr = "azbatch_conn_id"
    default_conn_name = "azbatch_default"
    conn_type = "azbatch"
    hook_name = "Azure Batch (azbatch)"

    def __init__(self, azbatch_conn_id: str | None = None) -> None:
        super().__init__()
        self.azbatch_conn_id = azbatch_conn_id or config.get_str("default_conn_id")


def load_settings(conn: ConnectionFields) -> BatchConnectionSettings:
    """The connection's settings, its secrets registered with Airflow's secret masker."""
    settings = BatchConnectionSettings.from_connection(conn)
    mask_secrets(settings.secrets)
    return settings


def mask_secrets(secrets: list[str]) -> None:
    try:
        from airflow_provider_azbatch.compat import mask_secret
    except ImportError:  # pragma: no cover - outside an Airflow installation
        return
    for secret in secrets:
        mask_secret(secret)


class _Fields:
    """A connection's extras, checked for misspelt names, read as trimmed text (blank: None)."""

    def __init__(self, conn_id: str, extra: dict[str, Any]) -> None:
        self.conn_id = conn_id
        self.extra = extra
        # A misspelt extra would otherwise be ignored, and its setting silently default.
        unknown = sorted(str(key) for key in extra if key not in EXTRA_FIELDS and not key.startswith("extra__"))
        if unknown:
            from airflow_provider_azbatch.specs.validation import did_you_mean

            named = ", ".join(f"{name}{did_you_mean(name, EXTRA_FIELDS)}" for name in unknown)
            raise self.fail("extra", f"has unknown field(s) {named}; known: {', '.join(EXTRA_FIELDS)}")

    def get(self, name: str) -> str | None:
        value = self.extra.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return str(value).strip()

    def fail(self, name: str, problem: str) -> ConnectionConfigError:
        return ConnectionConfigError(self.conn_id, name, problem)


_Fail = Callable[[str, str], ConnectionConfigError]


def _account_url(account_url: str | None, fail: _Fail) -> str:
    """The Batch account endpoint, checked: scheme and host only."""
    if not account_url:
        raise fail(
            "account_url",
            "is missing: set the Batch account URL, e.g. https://<account>.<region>.batch.azure.com",
        )
    parts = urlsplit(account_url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise fail(
            "account_url",
            f"is not a valid URL ({account_url!r}): it must look like https://<account>.<region>.batch.azure.com",
        )
    if parts.path not in ("", "/") or parts.query:
        raise fail("account_url", f"must be the account endpoint only, without a path or query ({account_url!r})")
    return f"{parts.scheme}://{parts.netloc}"


def _auth_method(method_text: str | None, key: str | None, fail: _Fail) -> AuthMethod:
    """``auth_method`` as given; ``auto`` (or none): the account key when the connection has one."""
    if method_text is None or method_text.lower() == "auto":
        return AuthMethod.SHARED_KEY if key else AuthMethod.DEFAULT
    try:
        return AuthMethod(method_text.lower())
    except ValueError:
        choices = ", ".join(["auto", *(m.value for m in AuthMethod)])
        raise fail("auth_method", f"is {method_text!r}; use one of: {choices}") from None


def _resource_manager_url(override: str | None, fail: _Fail) -> str | None:
    if override is None:
        return None
    manager = urlsplit(override)
    if manager.scheme != "https" or not manager.hostname or manager.path not in ("", "/") or manager.query:
        raise fail(
            "resource_manager_url",
            f"must be an https endpoint without a path ({override!r}), e.g. https://management.azure.com",
        )
    return f"https://{manager.netloc}"


def _cloud(fields: _Fields) -> AzureCloud:
    """The Azure cloud named by ``cloud``, with the endpoints the extras override."""
    cloud_name = (fields.get("cloud") or "public").lower()
    authority_override, scope_override = fields.get("authority_host"), fields.get("token_scope")
    manager_override = _resource_manager_url(fields.get("resource_manager_url"), fields.fail)
    if cloud_name == "custom":
        if not authority_override or not scope_override:
            raise fields.fail(
                "cloud",
                "is custom: set both authority_host (e.g. https://login.example) and token_scope "
                "(e.g. https://batch.example//.default)",
            )
        cloud = AzureCloud("custom", scope_override, authority_override, "", manager_override or "")
    elif cloud_name in CLOUDS:
        base = CLOUDS[cloud_name]
        cloud = AzureCloud(
            base.name,
            scope_override or base.batch_scope,
            authority_override or base.authority_host,
            base.portal_url,
            manager_override or base.resource_manager_url,
        )
    else:
        raise fields.fail("cloud", f"is {cloud_name!r}; use public, us_government, china or custom")
    if cloud.authority_host.startswith("http://"):
        raise fields.fail(
            "authority_host", f"must use https ({cloud.authority_host!r}): token authorities are https only"
        )
    if not cloud.authority_host.startswith("https://"):
        cloud = replace(cloud, authority_host=f"https://{cloud.authority_host}")
    return cloud


def _extras(conn: ConnectionFields) -> dict[str, Any]:
    extra = dict(conn.extra_dejson or {})
    # Older UIs store form fields as extra__<conn type>__<name>.
    for key in list(extra):
        if key.startswith("extra__azbatch__"):
            extra.setdefault(key[len("extra__azbatch__") :], extra[key])
    return extra

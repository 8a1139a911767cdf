"""The connection's storage account, as a run uses it: a container created, a blob written, read back and
deleted, and a SAS the credential signs (with the account key, or a user delegation key for Entra ID) read.

The container (``azbatch-check-<random>``) is deleted whatever happens after its creation; a container that
could not be deleted is reported (``storage.cleanup``), with the command that deletes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings
from airflow_provider_azbatch.hooks.errors import root_cause
from airflow_provider_azbatch.hooks.storage import BlobStorage, storage_account_name
from airflow_provider_azbatch.preflight.fixes import BLOB_DATA_ROLE, assign_role, storage_scope
from airflow_provider_azbatch.preflight.report import Finding, Identity, failed, ok, warning

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient

ACCOUNT = "storage.account"
CONTAINER = "storage.container"
CLEANUP = "storage.cleanup"
BLOB = "storage.blob"
SAS = "storage.sas"
NEEDED_FOR = "Workspaces, @task.azure_batch, Blob inputs and outputs and uploaded task logs"
BLOB_NAME = "azbatch-check.txt"
SAS_LIFETIME = timedelta(minutes=5)
# Storage's codes for a signature it does not accept (Azurite says AuthorizationFailure for a wrong key).
_KEY_REFUSED = ("AuthenticationFailed", "AuthorizationFailure")
_ROLE_MISSING = ("AuthorizationPermissionMismatch", "AuthorizationFailure")


def check_storage(
    settings: BatchConnectionSettings, identity: Identity | None, name: str, needed_by: Sequence[str] | None
) -> list[Finding]:
    """``needed_by``: the tasks that need storage (None: not known, no DAG was given; empty: none needs it)."""
    if not settings.storage_account_url:
        return [_not_configured(needed_by)]
    if not settings.storage_account_key and settings.auth_method.value == "shared_key":
        account = storage_account_name(settings.storage_account_url)
        return [
            failed(
                ACCOUNT,
                f"storage account '{account}' has no storage_account_key, and a shared key connection has no other "
                "way to sign SAS for tasks",
                fix=f"set storage_account_key to one of its keys (az storage account keys list --account-name "
                f"{account}), or authenticate the connection with Entra ID",
            )
        ]
    storage = BlobStorage(settings)
    findings: list[Finding] = []
    with storage.service_client() as service:
        try:
            service.create_container(name)
        except Exception as exc:
            return [_account_refused(storage, identity, exc)]
        findings.append(ok(ACCOUNT, f"storage account '{storage.account_name}' at {storage.account_url}"))
        findings.append(ok(CONTAINER, f"container {name} created"))
        try:
            findings += _blob_and_sas(storage, service, identity, name)
        finally:
            left = _container_left(storage, service, name)
            if left is not None:
                findings.append(left)
    return findings


def _container_left(storage: BlobStorage, service: BlobServiceClient, name: str) -> Finding | None:
    """The container deleted (None), or the line saying it is left behind and how to delete it."""
    try:
        service.delete_container(name)
    except ResourceNotFoundError:
        return None
    except (HttpResponseError, ServiceRequestError, ServiceResponseError) as exc:
        why = root_cause(exc) if not isinstance(exc, HttpResponseError) else _describe(exc)
        return warning(
            CLEANUP,
            f"container {name} of storage account '{storage.account_name}' could not be deleted and is left behind: "
            f"{why}",
            fix=f"delete it: az storage container delete --name {name} --account-name {storage.account_name} "
            "--auth-mode login",
        )
    return None


def _blob_and_sas(
    storage: BlobStorage, service: BlobServiceClient, identity: Identity | None, name: str
) -> list[Finding]:
    data = f"airflow azbatch check {name}\n".encode()
    blob = service.get_blob_client(name, BLOB_NAME)
    try:
        blob.upload_blob(data)
        read = blob.download_blob().readall()
    except HttpResponseError as exc:
        return [_role_missing(BLOB, storage, identity, "write and read a blob", exc)]
    except (ServiceRequestError, ServiceResponseError) as exc:
        return [failed(BLOB, f"writing and reading a blob failed: {root_cause(exc)}", fix=_service_fix())]
    if read != data:
        return [failed(BLOB, f"a blob written to {name} read back different", fix=_service_fix())]
    findings = [ok(BLOB, f"blob {name}/{BLOB_NAME} written and read back")]
    findings.append(_sas(storage, identity, name, data))
    try:
        blob.delete_blob()
    except (ServiceRequestError, ServiceResponseError) as exc:
        findings.append(failed(BLOB, f"deleting the blob failed: {root_cause(exc)}", fix=_service_fix()))
    except HttpResponseError as exc:
        findings.append(_role_missing(BLOB, storage, identity, "delete a blob", exc))
    return findings


def _sas(storage: BlobStorage, identity: Identity | None, container: str, data: bytes) -> Finding:
    keyed = bool(storage.settings.storage_account_key)
    signed_with = "the account key" if keyed else "a user delegation key"
    try:
        url = storage.blob_read_url(container, BLOB_NAME, SAS_LIFETIME)
    except (ServiceRequestError, ServiceResponseError) as exc:
        return failed(SAS, f"asking for a user delegation key failed: {root_cause(exc)}", fix=_service_fix())
    except HttpResponseError as exc:  # only a user delegation key is asked of the service
        return failed(
            SAS,
            f"storage account '{storage.account_name}' gives no user delegation key to {_who(identity)}: "
            f"{_describe(exc)}",
            fix=f"assign it {BLOB_DATA_ROLE} (which may ask for user delegation keys) on the storage account: "
            f"{assign_role(BLOB_DATA_ROLE, identity, storage_scope(storage.account_name))}",
        )
    try:
        with storage.blob_client_from_url(url) as by_sas:
            read = by_sas.download_blob().readall()
    except (ServiceRequestError, ServiceResponseError) as exc:
        return failed(SAS, f"reading the blob through a SAS failed: {root_cause(exc)}", fix=_service_fix())
    except HttpResponseError as exc:
        if keyed:
            return failed(
                SAS,
                f"a SAS signed with {signed_with} is refused: {_describe(exc)}",
                fix="the storage account may refuse shared key authorization (allowSharedKeyAccess false): leave "
                "storage_account_key empty and authenticate with Entra ID, so that SAS are signed with user "
                "delegation keys",
            )
        return failed(SAS, f"a SAS signed with {signed_with} is refused: {_describe(exc)}", fix=_service_fix())
    if read != data:
        return failed(SAS, "a blob read through a SAS came back different", fix=_service_fix())
    return ok(SAS, f"a SAS signed with {signed_with} reads the blob (tasks get such SAS)")


def _not_configured(needed_by: Sequence[str] | None) -> Finding:
    fix = (
        "set storage_account_url (https://<account>.blob.core.windows.net) and storage_account_key, or give the "
        f"connection's Entra ID identity {BLOB_DATA_ROLE} on that account"
    )
    if needed_by:
        return failed(
            ACCOUNT,
            f"the connection has no storage account, and {', '.join(needed_by)} need one (a workspace, "
            "@task.azure_batch, Blob inputs or outputs, uploaded logs)",
            fix=fix,
        )
    if needed_by is not None:
        return ok(ACCOUNT, "the connection has no storage account; no task checked needs one")
    return warning(ACCOUNT, f"the connection has no storage account: {NEEDED_FOR} need one", fix=fix)


def _account_refused(storage: BlobStorage, identity: Identity | None, exc: BaseException) -> Finding:
    account, url = storage.account_name, storage.account_url
    where = (
        f"check storage_account_url: the account's Blob endpoint (az storage account show --name {account} --query "
        "primaryEndpoints.blob)"
    )
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return failed(ACCOUNT, f"cannot reach storage account '{account}' at {url}: {root_cause(exc)}", fix=where)
    if isinstance(exc, ResourceNotFoundError):
        return failed(ACCOUNT, f"storage account '{account}' does not exist at {url} ({_describe(exc)})", fix=where)
    if isinstance(exc, HttpResponseError) and _code(exc):  # the storage service's answer
        if storage.settings.storage_account_key and _code(exc) in _KEY_REFUSED:
            return failed(
                ACCOUNT,
                f"storage account '{account}' refuses storage_account_key: {_describe(exc)}",
                fix="set storage_account_key to one of its keys: az storage account keys list --account-name "
                f"{account}",
            )
        return _role_missing(CONTAINER, storage, identity, "create a container", exc)
    if isinstance(exc, ClientAuthenticationError):  # the credential got no token for Storage
        return failed(
            ACCOUNT,
            f"no token for storage account '{account}': {str(exc).splitlines()[0]}",
            fix=storage.settings.credentials_hint(),
        )
    if isinstance(exc, HttpResponseError):
        return failed(ACCOUNT, f"storage account '{account}' refused to create a container: {exc}", fix=_service_fix())
    raise exc


def _role_missing(
    check: str, storage: BlobStorage, identity: Identity | None, what: str, exc: HttpResponseError
) -> Finding:
    if _code(exc) in _ROLE_MISSING and not storage.settings.storage_account_key:
        return failed(
            check,
            f"storage account '{storage.account_name}' does not let {_who(identity)} {what}: {_describe(exc)}",
            fix=f"assign it {BLOB_DATA_ROLE} on the storage account: "
            f"{assign_role(BLOB_DATA_ROLE, identity, storage_scope(storage.account_name))}",
        )
    return failed(
        check, f"storage account '{storage.account_name}' refused to {what}: {_describe(exc)}", fix=_service_fix()
    )


def _code(exc: HttpResponseError) -> str:
    code = getattr(exc, "error_code", None) or ""
    return str(getattr(code, "value", code))


def _describe(exc: HttpResponseError) -> str:
    message = str(getattr(exc, "reason", "") or "")
    lines = [line for line in str(exc.message or "").splitlines() if line.strip()]
    text = lines[0] if lines else message
    code = _code(exc)
    return f"{code}: {text}" if code and code not in text else text


def _who(identity: Identity | None) -> str:
    return identity.description if identity is not None else "the connection's identity"


def _service_fix() -> str:
    return (
        "try again; if it persists, look at the storage account's diagnostics (Azure portal, the account, Diagnose "
        "and solve problems)"
    )

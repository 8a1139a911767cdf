"""File systems a pool's nodes mount: Blob containers (blobfuse), Azure Files shares, NFS and CIFS exports.

Each is mounted on every node at ``$AZ_BATCH_NODE_MOUNTS_DIR/<path>`` before its start task runs. Keys, SAS
tokens and passwords come from Airflow connections when the task runs (never from the DAG file): they go to the
Batch service in the pool definition only, are registered with the secret masker, and are left out of the pool's
specification hash (a rotated key does not make a shared pool "different").

A managed identity (``identityReference``) cannot be used on pools this provider creates: the Batch data plane
cannot give a pool an identity ("It is not possible to create pools with managed identities using the Batch
Service APIs or SDKs"), so blobfuse with an identity needs a pool made with ARM, Bicep or the portal
(``BatchPool.existing``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_provider_azbatch.pools.errors import PoolStrategyError

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import ConnectionFields

# What the service never returns and the pool's specification hash leaves out.
SECRET_KEYS = frozenset({"accountKey", "sasKey", "password"})
_CONTAINER = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")
_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")


@dataclass(frozen=True)
class StorageCredentials:
    """A storage account's name and a key or a SAS token (without the leading ``?``), read from a connection."""

    account: str
    key: str | None = field(default=None, repr=False)
    sas: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class LoginCredentials:
    """A user name and password (CIFS), read from a connection."""

    username: str
    password: str = field(repr=False)


def _relative_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PoolStrategyError(f"{where}.path must be a directory name below $AZ_BATCH_NODE_MOUNTS_DIR, got {value!r}")
    path = value.strip().strip("/")
    if value.strip().startswith("/") or not path or ".." in path.split("/") or any(c.isspace() for c in path):
        raise PoolStrategyError(
            f"{where}.path {value!r} must be relative (no leading '/', no '..', no spaces): the node mounts it at "
            "$AZ_BATCH_NODE_MOUNTS_DIR/<path>"
        )
    return path


def _options(value: Any, where: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise PoolStrategyError(f"{where}.options must be a string of mount options, got {value!r}")
    return value


def _conn_id(value: Any, where: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise PoolStrategyError(f"{where}.conn_id must be a connection id, got {value!r}")
    return value


def _check_place(mount: BlobMount | FileShareMount | NfsMount, where: str) -> None:
    """A mount's path (made relative to the mounts directory), its connection id if it has one, its options."""
    object.__setattr__(mount, "path", _relative_path(mount.path, where))
    _conn_id(getattr(mount, "conn_id", None), where)
    _options(mount.options, where)


def _configuration(name: str, config: dict[str, Any], options: str | None) -> dict[str, Any]:
    """A mount's REST configuration, its mount options added when it has some."""
    if options:
        config["mountOptions"] = options
    return {name: config}


@dataclass(frozen=True)
class BlobMount:
    """A Blob container mounted with blobfuse.

    :param container: the container.
    :param path: where it appears: ``$AZ_BATCH_NODE_MOUNTS_DIR/<path>``.
    :param conn_id: a connection with the storage account: login (or extra ``account_name``) the account name,
        password its key, or extra ``sas_token`` a SAS token (a ``wasb`` connection has this shape). Default: the
        ``azbatch`` connection's own storage account (``storage_account_url`` with ``storage_account_key``).
    :param options: blobfuse options (``blobfuseOptions``), e.g. ``"-o attr_timeout=240 -o negative_timeout=120"``.
    """

    container: str
    path: str
    conn_id: str | None = None
    options: str | None = None

    kind = "blob"

    def __post_init__(self) -> None:
        if not isinstance(self.container, str) or not _CONTAINER.fullmatch(self.container):
            raise PoolStrategyError(
                f"mounts: BlobMount.container {self.container!r} is not a Blob container name (3 to 63 lowercase "
                "letters, digits and single hyphens)"
            )
        _check_place(self, "mounts: BlobMount")

    def describe(self) -> str:
        return f"Blob container {self.container} at {self.path}"

    def to_rest(self, credentials: StorageCredentials | None) -> dict[str, Any]:
        if credentials is None:
            raise PoolStrategyError(f"mounts: {self.describe()}: its storage account was not read from a connection")
        config: dict[str, Any] = {
            "accountName": credentials.account,
            "containerName": self.container,
            "relativeMountPath": self.path,
        }
        if credentials.key:
            config["accountKey"] = credentials.key
        elif credentials.sas:
            config["sasKey"] = credentials.sas.lstrip("?")
        else:
            raise PoolStrategyError(
                f"mounts: {self.describe()} needs the storage account's key or a SAS token in its connection"
            )
        if self.options:
            config["blobfuseOptions"] = self.options
        return {"azureBlobFileSystemConfiguration": config}


@dataclass(frozen=True)
class FileShareMount:
    """An Azure Files share mounted over SMB.

    :param url: the share, ``https://<account>.file.core.windows.net/<share>``.
    :param path: where it appears: ``$AZ_BATCH_NODE_MOUNTS_DIR/<path>``.
    :param conn_id: a connection whose password is the storage account's key (login, if set, must be the account);
        default: the ``azbatch`` connection's ``storage_account_key`` when its storage account is the share's.
    :param options: mount options, e.g. ``"-o vers=3.0,dir_mode=0777,file_mode=0777,serverino"``.
    """

    url: str
    path: str
    conn_id: str | None = None
    options: str | None = None

    kind = "file_share"

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme != "https" or not parts.hostname or not parts.path.strip("/"):
            raise PoolStrategyError(
                f"mounts: FileShareMount.url {self.url!r} is not a share URL: give "
                "https://<account>.file.core.windows.net/<share>"
            )
        _check_place(self, "mounts: FileShareMount")

    @property
    def account(self) -> str:
        return (urlsplit(self.url).hostname or "").split(".")[0]

    def describe(self) -> str:
        return f"Azure Files share {self.url} at {self.path}"

    def to_rest(self, credentials: StorageCredentials | None) -> dict[str, Any]:
        if credentials is None or not credentials.key:
            raise PoolStrategyError(f"mounts: {self.describe()} needs the storage account's key in its connection")
        config: dict[str, Any] = {
            "accountName": credentials.account,
            "azureFileUrl": self.url.rstrip("/"),
            "accountKey": credentials.key,
            "relativeMountPath": self.path,
        }
        return _configuration("azureFileShareConfiguration", config, self.options)


@dataclass(frozen=True)
class NfsMount:
    """An NFS export, ``source="10.0.0.4:/exports/data"`` (no credentials)."""

    source: str
    path: str
    options: str | None = None

    kind = "nfs"

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or ":" not in self.source or any(c.isspace() for c in self.source):
            raise PoolStrategyError(
                f"mounts: NfsMount.source {self.source!r} is not an NFS export: give <server>:/<path>"
            )
        _check_place(self, "mounts: NfsMount")

    def describe(self) -> str:
        return f"NFS export {self.source} at {self.path}"

    def to_rest(self, credentials: None = None) -> dict[str, Any]:
        return _configuration(
            "nfsMountConfiguration", {"source": self.source, "relativeMountPath": self.path}, self.options
        )


@dataclass(frozen=True)
class CifsMount:
    """A CIFS/SMB share other than Azure Files, ``source="//server/share"``; user and password from ``conn_id``."""

    source: str
    path: str
    conn_id: str
    options: str | None = None

    kind = "cifs"

    def __post_init__(self) -> None:
        if (
            not isinstance(self.source, str)
            or not self.source.startswith("//")
            or any(c.isspace() for c in self.source)
        ):
            raise PoolStrategyError(f"mounts: CifsMount.source {self.source!r} is not a share: give //<server>/<share>")
        object.__setattr__(self, "path", _relative_path(self.path, "mounts: CifsMount"))
        if _conn_id(self.conn_id, "mounts: CifsMount") is None:
            raise PoolStrategyError("mounts: CifsMount.conn_id is missing: the connection holds its user and password")
        _options(self.options, "mounts: CifsMount")

    def describe(self) -> str:
        return f"CIFS share {self.source} at {self.path}"

    def to_rest(self, credentials: LoginCredentials | None) -> dict[str, Any]:
        if credentials is None:
            raise PoolStrategyError(
                f"mounts: {self.describe()}: its user was not read from connection {self.conn_id!r}"
            )
        config: dict[str, Any] = {
            "username": credentials.username,
            "password": credentials.password,
            "source": self.source,
            "relativeMountPath": self.path,
        }
        return _configuration("cifsMountConfiguration", config, self.options)


Mount = BlobMount | FileShareMount | NfsMount | CifsMount
MOUNT_TYPES = (BlobMount, FileShareMount, NfsMount, CifsMount)


def check_mounts(mounts: Sequence[Any]) -> tuple[Mount, ...]:
    """The mounts as given, each a mount object, with distinct paths."""
    if isinstance(mounts, (str, bytes)) or not isinstance(mounts, Sequence):
        raise PoolStrategyError(
            f"mounts must be a list of BlobMount, FileShareMount, NfsMount or CifsMount, got {mounts!r}"
        )
    seen: dict[str, int] = {}
    for index, mount in enumerate(mounts):
        if not isinstance(mount, MOUNT_TYPES):
            raise PoolStrategyError(
                f"mounts[{index}] must be a BlobMount, FileShareMount, NfsMount or CifsMount, got "
                f"{type(mount).__name__} {mount!r}"
            )
        if mount.path in seen:
            raise PoolStrategyError(
                f"mounts[{index}].path {mount.path!r} is also mounts[{seen[mount.path]}].path: each mount needs its own"
            )
        seen[mount.path] = index
    return tuple(mounts)


def storage_account_from_connection(conn: ConnectionFields, default_account: str | None = None) -> StorageCredentials:
    """A storage account from a connection: login or extra ``account_name``; password = key, or ``sas_token``."""
    extra = conn.extra_dejson or {}
    account = extra.get("account_name") or conn.login or default_account
    key = conn.password or None
    sas = extra.get("sas_token") or None
    if not account or not _ACCOUNT.fullmatch(str(account)):
        raise PoolStrategyError(
            f"Connection '{conn.conn_id}': login (or extra account_name) must be the storage account name, "
            f"got {account!r}"
        )
    if not key and not sas:
        raise PoolStrategyError(
            f"Connection '{conn.conn_id}': give the storage account key as password, or extra sas_token"
        )
    return StorageCredentials(str(account), key, sas)

"""Blob storage next to a Batch account: least-privilege SAS for tasks, and reading uploaded logs.

Tasks get container URLs with short-lived SAS tokens: read+list on the containers they download from,
create+write on the containers they upload to (they can neither read nor delete there). The tokens
are signed with the storage account key, or with a user delegation key obtained through the
connection's Entra ID credential. The hook itself reads blobs (uploaded task logs) with the account
key or that credential, never with a task's SAS.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote, urlsplit

from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import (
    BlobClient,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerSasPermissions,
    generate_blob_sas,
    generate_container_sas,
)

from airflow_provider_azbatch.hooks import lineage_report as hook_lineage
from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings, ConnectionConfigError
from airflow_provider_azbatch.hooks.credentials import build_credential
from airflow_provider_azbatch.hooks.dataset_names import DatasetName, blob_dataset
from airflow_provider_azbatch.hooks.proxies import proxy_kwargs

# Clock skew allowance: a SAS valid from "now" can be refused by a node whose clock runs behind.
_SKEW = timedelta(minutes=5)


class StorageNotConfiguredError(ConnectionConfigError):
    """The connection has no (usable) storage account for what a job asks of Blob storage."""


def storage_account_name(url: str) -> str:
    """``https://acct.blob.core.windows.net`` → ``acct``; emulator style ``http://host:port/acct`` → ``acct``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    path_account = parts.path.strip("/").split("/")[0]
    try:
        ipaddress.ip_address(host)
        is_ip = True
    except ValueError:
        is_ip = host == "localhost"
    return path_account if is_ip and path_account else host.split(".")[0]


@dataclass
class BlobStorage:
    """The storage account of a connection (``storage_account_url`` / ``storage_account_key``).

    Every blob read and written, by the provider or by the tasks it hands access to, is reported to Airflow's hook
    lineage collector with ``owner`` (the hook) as its context.
    """

    settings: BatchConnectionSettings
    owner: Any = None

    @classmethod
    def from_settings(cls, settings: BatchConnectionSettings, needed_for: str, owner: Any = None) -> BlobStorage:
        if not settings.storage_account_url:
            raise StorageNotConfiguredError(
                settings.conn_id,
                "storage_account_url",
                f"is missing: {needed_for} need a storage account (e.g. https://<account>.blob.core.windows.net), "
                "with storage_account_key or an Entra ID auth_method",
            )
        if not settings.storage_account_key and settings.auth_method is AuthMethod.SHARED_KEY:
            raise StorageNotConfiguredError(
                settings.conn_id,
                "storage_account_key",
                f"is missing: {needed_for} need it to sign SAS tokens (or use an Entra ID auth_method)",
            )
        return cls(settings, owner)

    @property
    def account_url(self) -> str:
        assert self.settings.storage_account_url
        return self.settings.storage_account_url.rstrip("/")

    @property
    def account_name(self) -> str:
        return storage_account_name(self.account_url)

    def _credential(self, asynchronous: bool = False) -> Any:
        if self.settings.storage_account_key:
            return AzureNamedKeyCredential(self.account_name, self.settings.storage_account_key)
        return build_credential(self.settings, asynchronous=asynchronous)

    def _client_kwargs(self) -> dict[str, Any]:
        kwargs = proxy_kwargs(self.account_url)
        if self.settings.ca_bundle:
            kwargs["connection_verify"] = self.settings.ca_bundle
        return kwargs

    def service_client(self) -> BlobServiceClient:
        kwargs = self._client_kwargs()
        return BlobServiceClient(self.account_url, credential=self._credential(), **kwargs)

    @contextlib.asynccontextmanager
    async def async_service(self) -> AsyncIterator[Any]:
        """An aio storage client, closed with its credential afterwards."""
        from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

        kwargs = self._client_kwargs()
        credential = self._credential(asynchronous=True)
        try:
            async with AsyncBlobServiceClient(self.account_url, credential=credential, **kwargs) as service:
                yield service
        finally:
            close = getattr(credential, "close", None)
            if close is not None:
                await close()

    def blob_client_from_url(self, url: str) -> BlobClient:
        """A client of one blob through its URL alone (a SAS URL: no other credential)."""
        return BlobClient.from_blob_url(url, **self._client_kwargs())

    def dataset(self, container: str, path: str | None = None) -> DatasetName:
        """The OpenLineage name (and asset URI) of blob ``path`` of ``container`` (see lineage.naming)."""
        return blob_dataset(self.account_url, container, path)

    def _report(self, container: str, path: str | None, *, written: bool) -> None:
        hook_lineage.report(self.owner, self.dataset(container, path), written=written)

    def container_url(self, container: str) -> str:
        return f"{self.account_url}/{quote(container)}"

    def ensure_container(self, container: str) -> None:
        with self.service_client() as service, contextlib.suppress(ResourceExistsError):
            service.create_container(container)

    def _sas(self, container: str, permission: ContainerSasPermissions, lifetime: timedelta) -> str:
        now = datetime.now(timezone.utc)
        start, expiry = now - _SKEW, now + lifetime
        if self.settings.storage_account_key:
            return generate_container_sas(
                self.account_name,
                container,
                account_key=self.settings.storage_account_key,
                permission=permission,
                start=start,
                expiry=expiry,
            )
        with self.service_client() as service:
            key = service.get_user_delegation_key(start, expiry)
        return generate_container_sas(
            self.account_name, container, user_delegation_key=key, permission=permission, start=start, expiry=expiry
        )

    def read_url(self, container: str, lifetime: timedelta, paths: Sequence[str | None] = (None,)) -> str:
        """Container URL a task can list and download from, and nothing else (``paths``: what the tasks read)."""
        sas = self._sas(container, ContainerSasPermissions(read=True, list=True), lifetime)
        for path in paths:
            self._report(container, path, written=False)
        return f"{self.container_url(container)}?{sas}"

    def write_url(self, container: str, lifetime: timedelta, paths: Sequence[str | None] = (None,)) -> str:
        """Container URL a task can create and write blobs in; it cannot read, list or delete (``paths``: where
        the tasks write)."""
        sas = self._sas(container, ContainerSasPermissions(write=True, create=True), lifetime)
        for path in paths:
            self._report(container, path, written=True)
        return f"{self.container_url(container)}?{sas}"

    def blob_read_url(self, container: str, name: str, lifetime: timedelta) -> str:
        """URL of one blob with a SAS that can read it and nothing else."""
        now = datetime.now(timezone.utc)
        start, expiry = now - _SKEW, now + lifetime
        permission = BlobSasPermissions(read=True)
        if self.settings.storage_account_key:
            sas = generate_blob_sas(
                self.account_name,
                container,
                name,
                account_key=self.settings.storage_account_key,
                permission=permission,
                start=start,
                expiry=expiry,
            )
        else:
            with self.service_client() as service:
                key = service.get_user_delegation_key(start, expiry)
            sas = generate_blob_sas(
                self.account_name,
                container,
                name,
                user_delegation_key=key,
                permission=permission,
                start=start,
                expiry=expiry,
            )
        self._report(container, name, written=False)  # the tasks read it
        return f"{self.container_url(container)}/{quote(name)}?{sas}"

    def upload_if_missing(self, container: str, name: str, data: bytes) -> bool:
        """Upload ``data`` as ``name`` unless a blob of that name exists (content-addressed names); True if uploaded."""
        self.ensure_container(container)
        with self.service_client() as service:
            blob = service.get_blob_client(container, name)
            if blob.exists():
                return False
            try:
                blob.upload_blob(data, overwrite=False)
            except ResourceExistsError:  # uploaded by someone else in between: the same bytes
                return False
        self._report(container, name, written=True)
        return True

    # -- reading blobs (the hook's own access, never a task's SAS) -------------------------------------
    # The asynchronous reads (the triggerer's) report nothing: no task runs there to own them.
    def blob_size(self, container: str, name: str) -> int | None:
        with self.service_client() as service:
            try:
                return int(service.get_blob_client(container, name).get_blob_properties().size)
            except ResourceNotFoundError:
                return None

    def read_blob(self, container: str, name: str, start: int, end: int) -> bytes:
        with self.service_client() as service:
            data = (
                service.get_blob_client(container, name).download_blob(offset=start, length=end - start + 1).readall()
            )
        self._report(container, name, written=False)
        return data

    def list_blobs(
        self, container: str, prefix: str | None, since: datetime | None = None, limit: int | None = None
    ) -> list[BlobEntry]:
        """The blobs under ``prefix`` (all of the container: None) last modified at or after ``since``, by name, at
        most ``limit`` of them."""
        found: list[BlobEntry] = []
        with self.service_client() as service:
            for blob in service.get_container_client(container).list_blobs(name_starts_with=prefix or None):
                if since is None or blob.last_modified is None or blob.last_modified >= since:
                    found.append(BlobEntry(container, blob.name, int(blob.size or 0)))
                    if limit is not None and len(found) >= limit:
                        break
        return found

    def count_blobs(self, container: str, prefix: str) -> int:
        """How many blobs of the container have names starting with ``prefix``."""
        with self.service_client() as service:
            return sum(1 for _ in service.get_container_client(container).list_blobs(name_starts_with=prefix))

    async def ablob_size(self, container: str, name: str) -> int | None:
        async with self.async_service() as service:
            try:
                return int((await service.get_blob_client(container, name).get_blob_properties()).size)
            except ResourceNotFoundError:
                return None

    async def aread_blob(self, container: str, name: str, start: int, end: int) -> bytes:
        async with self.async_service() as service:
            stream = await service.get_blob_client(container, name).download_blob(offset=start, length=end - start + 1)
            return bytes(await stream.readall())


@dataclass(frozen=True)
class BlobEntry:
    """One blob found by a listing."""

    container: str
    name: str
    size: int


@dataclass(frozen=True)
class LogLocation:
    """Where a job's task logs are uploaded: ``<container>/<prefix>/<job>/<task>/stdout.txt``.

    Kept with the job as metadata (``LOGS_METADATA_KEY``: ``<container>/<prefix>``), so that whoever
    watches the job later (the sensor, the CLI) finds its uploaded logs.
    """

    container: str
    prefix: str

    METADATA_KEY = "azbatch-logs"

    def path(self, job_id: str, task_id: str) -> str:
        return "/".join(part for part in (self.prefix.strip("/"), job_id, task_id) if part)

    def blob(self, job_id: str, task_id: str, file_name: str) -> str:
        return f"{self.path(job_id, task_id)}/{file_name}"

    def to_json(self) -> dict[str, str]:
        return {"container": self.container, "prefix": self.prefix}

    @classmethod
    def from_json(cls, data: dict[str, str] | None) -> LogLocation | None:
        return cls(data["container"], data["prefix"]) if data else None

    def to_metadata(self) -> str:
        return f"{self.container}/{self.prefix}"

    @classmethod
    def from_metadata(cls, metadata: list[Any] | None) -> LogLocation | None:
        """The location recorded in a job's metadata (SDK ``BatchMetadataItem`` list), if any."""
        value = next((item.value for item in metadata or [] if item.name == cls.METADATA_KEY), None)
        if not value or "/" not in value:
            return None
        container, prefix = value.split("/", 1)
        return cls(container, prefix)

"""Names of Blob data as OpenLineage's naming spec gives them, and as the Airflow asset URIs of this provider. No I/O.

OpenLineage names Azure Blob Storage data ``wasbs://{container}@{account}.dfs.core.windows.net`` (the namespace)
and ``{blob path}`` (the name). The provider's Airflow asset URIs hold the same parts with the container moved from
the URI's user part into its path, ``wasbs://{account}.dfs.core.windows.net/{container}/{blob path}``: Airflow 3.0
drops a URI's user part (the container) from an asset URI (see compat.py).

Beyond the spec's public-cloud example:

- a storage account of another cloud keeps its own domain, with ``blob`` as ``dfs`` as the spec has it
  (``https://acct.blob.core.chinacloudapi.cn`` -> ``wasbs://c@acct.dfs.core.chinacloudapi.cn``);
- an endpoint that names the account in its path, not its host (Azurite and other emulators, and any
  ``http(s)://<ip or localhost>:<port>/<account>``), keeps its host, port and account path
  (``http://127.0.0.1:10000/devstoreaccount1`` -> ``wasb://c@127.0.0.1:10000/devstoreaccount1``): a name made up
  as ``devstoreaccount1.dfs.core.windows.net`` would point at an account in Azure that these blobs are not in;
- ``wasb`` (not ``wasbs``) for an endpoint reached over plain HTTP, as Hadoop names the two;
- a blob path is given without a leading or trailing ``/``; a whole container (an empty prefix) is named ``/``.

Any other URL (an input downloaded from ``url=``) is named by its scheme and host, and its path; the query
(where a SAS token travels) and the fragment are never part of a name.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

# The blob endpoint label of a storage account's host, and the one OpenLineage's namespace uses instead.
_BLOB_LABEL = ".blob."
_DFS_LABEL = ".dfs."
SCHEMES = ("wasbs", "wasb")


def _path_style(host: str) -> bool:
    """Whether an endpoint names its account in its path (an IP address or localhost: emulators)."""
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _clean(path: str | None) -> str:
    return (path or "").strip("/")


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset's identity, and the Airflow asset URI of the same data."""

    namespace: str
    name: str
    asset_uri: str = ""

    def __post_init__(self) -> None:
        if not self.asset_uri:  # not blob data: the namespace and the name joined
            joined = self.namespace if self.name == "/" else f"{self.namespace}/{self.name}"
            object.__setattr__(self, "asset_uri", joined)


def blob_dataset(account_url: str, container: str, path: str | None = None) -> DatasetName:
    """The name of blob ``path`` (a blob, a virtual directory or prefix; none: the whole container) of
    ``container`` in the storage account at ``account_url`` (its blob endpoint)."""
    parts = urlsplit(account_url.rstrip("/"))
    host = parts.hostname or ""
    scheme = "wasb" if parts.scheme == "http" else "wasbs"
    account = ""
    if _path_style(host):
        account = parts.path.strip("/").split("/")[0]
    elif _BLOB_LABEL in host:
        host = host.replace(_BLOB_LABEL, _DFS_LABEL, 1)
    authority = f"{host}:{parts.port}" if parts.port else host
    where = f"{authority}/{account}" if account else authority
    name = _clean(path)
    asset_uri = f"{scheme}://{where}/{container}" + (f"/{name}" if name else "")
    return DatasetName(f"{scheme}://{container}@{where}", name or "/", asset_uri)


def url_dataset(url: str, storage_account_url: str | None = None) -> DatasetName:
    """The name of the data at ``url``: a blob of the storage account (``https://acct.blob.../c/path``, or the
    connection's own, emulators included) as :func:`blob_dataset` names it, anything else by scheme and host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    path = unquote(parts.path)
    own = urlsplit(storage_account_url.rstrip("/")) if storage_account_url else None
    if own is not None and (own.hostname, own.port) == (parts.hostname, parts.port) and _path_style(host):
        account_path = own.path.rstrip("/")
        if path.startswith(f"{account_path}/"):
            container, _, blob = path[len(account_path) + 1 :].partition("/")
            if container:
                return blob_dataset(storage_account_url or "", container, blob)
    if _BLOB_LABEL in host and not _path_style(host):
        container, _, blob = path.lstrip("/").partition("/")
        if container:
            account_url = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
            return blob_dataset(account_url, container, blob)
    authority = parts.netloc.rpartition("@")[2]
    return DatasetName(f"{parts.scheme}://{authority}", _clean(path) or "/")


ASSET_URI_FORM = "wasbs://<account>.dfs.core.windows.net/<container>/<path>"


def dataset_of_uri(uri: str) -> DatasetName:
    """The dataset an asset URI of this provider names (:attr:`DatasetName.asset_uri` read back)."""
    parts = urlsplit(uri)
    segments = unquote(parts.path).strip("/").split("/", 2 if _path_style(parts.hostname or "") else 1)
    if parts.scheme not in SCHEMES or "@" in parts.netloc or not parts.hostname or not segments[0]:
        raise ValueError(f"{uri!r} is not an Azure Blob asset URI: {ASSET_URI_FORM}")
    authority = parts.netloc
    if _path_style(parts.hostname or ""):
        if len(segments) < 2 or not segments[1]:
            raise ValueError(
                f"{uri!r} names no container after its account: {parts.scheme}://<host>/<account>/<container>"
            )
        authority, segments = f"{authority}/{segments[0]}", segments[1:]
    container, path = segments[0], segments[1] if len(segments) > 1 else ""
    return DatasetName(f"{parts.scheme}://{container}@{authority}", _clean(path) or "/", uri)

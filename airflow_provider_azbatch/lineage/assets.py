"""Airflow asset URIs of Azure Blob data (``wasbs://`` and ``wasb://``): the provider info's ``asset-uris`` entry.

Airflow normalizes such URIs with :func:`sanitize_uri`, hooks create assets with :func:`create_asset`, and the
OpenLineage provider turns an asset into a dataset with :func:`convert_asset_to_openlineage` (what it does with the
assets hooks report, and with those an operator without lineage of its own lists as inlets or outlets). The names
are :mod:`airflow_provider_azbatch.hooks.dataset_names`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.hooks.dataset_names import SCHEMES, blob_dataset, dataset_of_uri

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Asset


def sanitize_uri(uri: SplitResult) -> SplitResult:
    dataset_of_uri(uri.geturl())  # a storage account and a container, or a ValueError that shows the form
    return uri


def create_asset(*, account_url: str, container: str, path: str | None = None, extra: Any = None) -> Asset:
    """The asset of blob ``path`` of ``container`` in the storage account at ``account_url`` (its blob endpoint)."""
    from airflow.sdk import Asset

    return Asset(uri=blob_dataset(account_url, container, path).asset_uri, extra=extra or {})


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    from airflow.providers.common.compat.openlineage.facet import Dataset

    name = dataset_of_uri(asset.uri)
    return Dataset(namespace=name.namespace, name=name.name)


__all__ = ["SCHEMES", "convert_asset_to_openlineage", "create_asset", "sanitize_uri"]

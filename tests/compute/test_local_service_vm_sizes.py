"""The local Batch service knows every VM size of the provider's catalog (it refuses sizes it does not know)."""

from __future__ import annotations

import json
from importlib import resources

from airflow_provider_azbatch.compute import load_catalog


def test_every_catalogued_size_is_one_the_local_service_accepts():
    shipped = resources.files("local_azure_batch").joinpath("data/vm_sizes.json").read_text(encoding="utf-8")
    known = set(json.loads(shipped)["names"])
    missing = sorted(size.name for size in load_catalog().sizes if size.name not in known)
    assert missing == [], (
        f"add {missing} to local-azure-batch/local_azure_batch/data/vm_sizes.json (the local service refuses a "
        "size it does not know)"
    )


def test_the_local_management_plane_lists_each_catalogued_size_as_the_catalog_describes_it():
    """The region's sizes (data/batch_vm_skus.json) are the catalog's, with its vCPUs and spot capability."""
    shipped = resources.files("local_azure_batch").joinpath("data/batch_vm_skus.json").read_text(encoding="utf-8")
    skus = {sku["name"].lower(): sku for sku in json.loads(shipped)["skus"]}
    catalog = {size.name: size for size in load_catalog().sizes}

    assert sorted(skus) == sorted(catalog), "regenerate data/batch_vm_skus.json from the provider's catalog"
    for name, size in catalog.items():
        capabilities = {c["name"]: c["value"] for c in skus[name]["capabilities"]}
        assert capabilities["vCPUs"] == str(size.vcpus), name
        assert capabilities["LowPriorityCapable"] == str(size.low_priority_capable), name
        assert skus[name]["familyName"], name
    # Sizes of one catalog family share one quota family.
    families = {}
    for name, size in catalog.items():
        families.setdefault(size.family, set()).add(skus[name]["familyName"])
    assert all(len(names) == 1 for names in families.values()), families

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

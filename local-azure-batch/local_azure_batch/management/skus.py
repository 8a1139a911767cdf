"""The VM sizes Batch offers in the account's region, as the management plane lists them (data/batch_vm_skus.json)."""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from importlib import resources
from typing import Any


@functools.cache
def _all_skus() -> tuple[dict[str, Any], ...]:
    text = resources.files("local_azure_batch").joinpath("data/batch_vm_skus.json").read_text(encoding="utf-8")
    return tuple(json.loads(text)["skus"])


def region_skus(unavailable: Collection[str] = ()) -> list[dict[str, Any]]:
    """The sizes offered, without those the region does not offer (lower-case names)."""
    return [sku for sku in _all_skus() if sku["name"].lower() not in unavailable]


def families() -> list[str]:
    """Every quota family of the sizes, in order of first appearance."""
    return list(dict.fromkeys(sku["familyName"] for sku in _all_skus()))

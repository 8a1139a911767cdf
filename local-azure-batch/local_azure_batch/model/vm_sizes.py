"""The VM sizes a pool may name: the service refuses a ``vmSize`` it does not know, as Azure Batch does.

Azure answers a pool (or a job's auto-pool) with an unknown size ``400 InvalidPropertyValue``, "The value
provided for one of the properties in the request body is invalid." before anything is created: reported
for ``STANDARD_A2_V2`` and ``STANDARD_D16`` (Azure/batch-shipyard issues 53 and 114), for ``small``
(Azure/azure-powershell issue 7177), and the service's own log line for ``STANDARD_DS64_v3`` reads "Invalid
property value for vmSize" (Azure/azure-batch-cli-extensions issue 119, a Batch engineer quoting it). The
details this service adds (``PropertyName`` ``vmSize``, ``PropertyValue``, ``Reason``) follow the shape of
the recorded ``InvalidPropertyValue`` answers (tests/fixtures/batch-service/recordings/create_pools.json);
their use for ``vmSize`` and the ``Reason`` text are a documented guess.

The names are in ``data/vm_sizes.json``, with their sources and dates.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from importlib import resources

from .errors import invalid_property


@functools.cache
def known_vm_sizes() -> frozenset[str]:
    """The sizes the shipped list names, lower case."""
    text = resources.files("local_azure_batch").joinpath("data/vm_sizes.json").read_text(encoding="utf-8")
    return frozenset(name.lower() for name in json.loads(text)["names"])


def check_vm_size(name: str, extra: Collection[str] = (), unavailable: Collection[str] = (), region: str = "") -> None:
    """Refuse a size that is neither in the shipped list nor one the service was started with (``--vm-size``),
    and a size the account's region does not offer (``--unavailable-vm-size``; the same answer, its reason
    naming the region: a documented guess)."""
    size = name.lower()
    if size in unavailable:
        raise invalid_property(
            "vmSize", name, f"The specified vmSize '{name}' is not available in the region '{region}' of this account."
        )
    if size in known_vm_sizes() or size in extra:
        return
    raise invalid_property(
        "vmSize", name, f"The specified vmSize '{name}' is not a virtual machine size the Batch service supports."
    )

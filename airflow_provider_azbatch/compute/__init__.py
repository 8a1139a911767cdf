"""Pure (no Airflow, no Azure SDK, no network) mapping from task resource needs to a Batch pool spec.

``pool_spec_from_requirements(ResourceRequirements(cpus=4, memory_gib=16), max_nodes=10).to_rest()``
gives the body fields of a Batch add-pool request for the cheapest fitting VM size.
"""

from __future__ import annotations

from airflow_provider_azbatch.compute.autoscale import AutoscaleSettings, autoscale_formula, iso8601_duration
from airflow_provider_azbatch.compute.catalog import VmCatalog, VmSize, load_catalog
from airflow_provider_azbatch.compute.errors import (
    CatalogError,
    ComputeSpecError,
    InvalidAutoscaleError,
    InvalidPoolSpecError,
    InvalidRequirementsError,
    NoFittingVmSizeError,
    RetiredImageFamilyError,
    UnknownImageFamilyError,
    UnknownVmSizeError,
    VmSizeTooSmallError,
)
from airflow_provider_azbatch.compute.images import (
    DEFAULT_IMAGE_FAMILY,
    PoolImage,
    end_of_support,
    known_image_families,
    pool_image,
)
from airflow_provider_azbatch.compute.pool_spec import (
    PoolSpec,
    check_vm_size_fits,
    default_task_slots,
    named_vm_size,
    pool_spec_from_requirements,
)
from airflow_provider_azbatch.compute.requirements import (
    ResourceRequirements,
    fits,
    parse_memory_gib,
    select_vm_size,
    vm_size_shortfalls,
)

__all__ = [
    "DEFAULT_IMAGE_FAMILY",
    "AutoscaleSettings",
    "CatalogError",
    "ComputeSpecError",
    "InvalidAutoscaleError",
    "InvalidPoolSpecError",
    "InvalidRequirementsError",
    "NoFittingVmSizeError",
    "PoolImage",
    "PoolSpec",
    "ResourceRequirements",
    "RetiredImageFamilyError",
    "UnknownImageFamilyError",
    "UnknownVmSizeError",
    "VmCatalog",
    "VmSize",
    "VmSizeTooSmallError",
    "autoscale_formula",
    "check_vm_size_fits",
    "default_task_slots",
    "end_of_support",
    "fits",
    "iso8601_duration",
    "known_image_families",
    "load_catalog",
    "named_vm_size",
    "parse_memory_gib",
    "pool_image",
    "pool_spec_from_requirements",
    "select_vm_size",
    "vm_size_shortfalls",
]

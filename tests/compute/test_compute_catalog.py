from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources

import pytest

from airflow_provider_azbatch.compute.catalog import VmCatalog, VmSize, load_catalog
from airflow_provider_azbatch.compute.errors import CatalogError, UnknownVmSizeError

EXPECTED_FAMILIES = {
    "Dv3", "Dsv3", "Dv4", "Dsv4", "Dv5", "Dsv5", "Dasv5", "Fsv2", "Ev3", "Esv3", "Ev5", "Esv5",
    "NCasT4_v3", "NC_A100_v4", "NDasrA100_v4", "NDm_A100_v4", "NCads_H100_v5", "ND_H100_v5", "NVadsA10_v5",
}  # fmt: skip


def _packaged_document() -> dict:
    text = resources.files("airflow_provider_azbatch.compute").joinpath("data/vm_sizes.json").read_text()
    return json.loads(text)


def test_packaged_catalog_has_the_expected_families_and_gpu_kinds() -> None:
    catalog = load_catalog()

    assert len(catalog) == 109
    assert {size.family for size in catalog} == EXPECTED_FAMILIES
    assert catalog.gpu_kinds == frozenset({"A10", "A100", "H100", "T4"})
    assert catalog.region == "eastus"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", catalog.retrieved)
    assert "V100" in catalog.retired_gpu_kinds


def test_packaged_catalog_header_names_its_sources() -> None:
    header = _packaged_document()["header"]

    assert {"source", "prices_source", "prices_note", "retrieved", "region", "note"} <= set(header)
    assert header["source"]
    assert all(url.startswith("https://learn.microsoft.com/azure/virtual-machines/") for url in header["source"])
    assert "scripts/update_vm_catalog.py" in header["prices_note"]


def test_packaged_catalog_rows_are_consistent() -> None:
    for size in load_catalog():
        assert size.name == size.name.lower()
        assert size.name.startswith("standard_")
        assert size.vcpus > 0
        assert size.memory_gib > 0
        assert size.hourly_usd > 0
        assert (size.gpus > 0) == (size.gpu_kind is not None) == (size.gpu_memory_gib is not None)
        assert size.low_priority_capable is True
        assert size.explicit_only == (size.family == "NVadsA10_v5")


def test_packaged_catalog_marks_the_infiniband_sizes() -> None:
    # The ND sizes' tables list InfiniBand (HDR on the A100 ones, NDR on the H100 one); no NC or NV size has it.
    marked = sorted(size.name for size in load_catalog() if size.infiniband)
    assert marked == ["standard_nd96amsr_a100_v4", "standard_nd96asr_v4", "standard_nd96isr_h100_v5"]
    assert load_catalog().get("standard_nc24ads_a100_v4").infiniband is False


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Specs as published on the learn.microsoft.com size pages (price varies with refreshes).
        ("standard_d2s_v3", VmSize("standard_d2s_v3", "Dsv3", 2, 8.0, 0, max_data_disks=4)),
        ("standard_e96s_v5", VmSize("standard_e96s_v5", "Esv5", 96, 672.0, 0, max_data_disks=32)),
        ("standard_e64_v3", VmSize("standard_e64_v3", "Ev3", 64, 432.0, 0, max_data_disks=32)),
        ("standard_f72s_v2", VmSize("standard_f72s_v2", "Fsv2", 72, 144.0, 0, max_data_disks=32)),
        (
            "standard_nc4as_t4_v3",
            VmSize("standard_nc4as_t4_v3", "NCasT4_v3", 4, 28.0, 0, 1, "T4", 16.0, 8),
        ),
        (
            "standard_nc64as_t4_v3",
            VmSize("standard_nc64as_t4_v3", "NCasT4_v3", 64, 440.0, 0, 4, "T4", 16.0, 32),
        ),
        (
            "standard_nc24ads_a100_v4",
            VmSize("standard_nc24ads_a100_v4", "NC_A100_v4", 24, 220.0, 0, 1, "A100", 80.0, 8),
        ),
        (
            "standard_nd96asr_v4",
            VmSize("standard_nd96asr_v4", "NDasrA100_v4", 96, 900.0, 0, 8, "A100", 40.0, 32, infiniband=True),
        ),
        (
            "standard_nd96amsr_a100_v4",
            VmSize("standard_nd96amsr_a100_v4", "NDm_A100_v4", 96, 1900.0, 0, 8, "A100", 80.0, 32, infiniband=True),
        ),
        (
            "standard_nc40ads_h100_v5",
            VmSize("standard_nc40ads_h100_v5", "NCads_H100_v5", 40, 320.0, 0, 1, "H100", 94.0, 8),
        ),
        (
            "standard_nv72ads_a10_v5",
            VmSize("standard_nv72ads_a10_v5", "NVadsA10_v5", 72, 880.0, 0, 2, "A10", 24.0, 32, explicit_only=True),
        ),
    ],
)
def test_packaged_catalog_specs(name: str, expected: VmSize) -> None:
    assert dataclasses.replace(load_catalog().get(name), hourly_usd=0) == expected


def test_default_catalog_is_parsed_once() -> None:
    assert load_catalog() is load_catalog()


@pytest.mark.parametrize("name", ["standard_d2s_v3", "Standard_D2s_v3", "STANDARD_D2S_V3", " standard_d2s_v3 "])
def test_lookup_is_case_insensitive(name: str) -> None:
    catalog = load_catalog()

    assert catalog.get(name).name == "standard_d2s_v3"
    assert name in catalog


def test_find_returns_none_for_unknown_names() -> None:
    assert load_catalog().find("standard_nc6s_v3") is None
    assert "standard_nc6s_v3" not in load_catalog()


def test_unknown_size_suggests_close_names() -> None:
    with pytest.raises(UnknownVmSizeError) as info:
        load_catalog().get("Standard_D4S_V6")

    assert str(info.value) == (
        "VM size 'Standard_D4S_V6' is not in the VM catalog (109 sizes, prices for eastus); "
        "did you mean standard_d4s_v5, standard_d4s_v4, standard_d4s_v3?"
    )


def test_unknown_size_without_close_names() -> None:
    catalog = VmCatalog([VmSize("standard_a", "A", 1, 1.0, 0.1)])

    with pytest.raises(UnknownVmSizeError) as info:
        catalog.get("standard_nc6s_v3")

    assert str(info.value) == (
        "VM size 'standard_nc6s_v3' is not in the VM catalog (1 sizes); use a Batch size name such as "
        "'standard_d4s_v5', or pass a catalog that lists it"
    )


def test_load_catalog_from_a_path_normalises_names_and_kinds(tmp_path) -> None:
    path = tmp_path / "sizes.json"
    path.write_text(
        json.dumps(
            {
                "header": {
                    "region": "westeurope",
                    "retrieved": "2026-01-02",
                    "retired_gpu_kinds": {"k80": "gone"},
                },
                "sizes": [
                    {"name": "Standard_X2", "family": "X", "vcpus": 2, "memory_gib": 4, "hourly_usd": 0.1},
                    {
                        "name": "standard_g1",
                        "family": "G",
                        "vcpus": 4,
                        "memory_gib": 28.5,
                        "hourly_usd": 1,
                        "gpus": 1,
                        "gpu_kind": "t4",
                        "gpu_memory_gib": 16,
                        "low_priority_capable": False,
                    },
                ],
            }
        )
    )

    catalog = load_catalog(path)

    assert catalog.sizes == (
        VmSize("standard_x2", "X", 2, 4.0, 0.1),
        VmSize("standard_g1", "G", 4, 28.5, 1.0, 1, "T4", 16.0, low_priority_capable=False),
    )
    assert (catalog.region, catalog.retrieved) == ("westeurope", "2026-01-02")
    assert dict(catalog.retired_gpu_kinds) == {"K80": "gone"}
    assert load_catalog(path) is not catalog


GOOD = {"name": "standard_x", "family": "X", "vcpus": 2, "memory_gib": 4, "hourly_usd": 0.1}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**GOOD, "vcpus": 0}, "sizes[0] ('standard_x'): 'vcpus' must be an integer >= 1, got 0"),
        ({**GOOD, "vcpus": 2.5}, "sizes[0] ('standard_x'): 'vcpus' must be an integer >= 1, got 2.5"),
        (
            {**GOOD, "memory_gib": "4"},
            "sizes[0] ('standard_x'): 'memory_gib' must be a number >= 0.001, got '4'",
        ),
        (
            {**GOOD, "hourly_usd": None},
            "sizes[0] ('standard_x'): 'hourly_usd' must be a number >= 0, got None",
        ),
        ({**GOOD, "gpus": 1}, "sizes[0] ('standard_x'): 'gpu_kind' is required when 'gpus' is 1"),
        (
            {**GOOD, "gpu_kind": "T4"},
            "sizes[0] ('standard_x'): 'gpu_kind' must be null when the size has no GPU",
        ),
        (
            {**GOOD, "low_priority_capable": "yes"},
            "sizes[0] ('standard_x'): 'low_priority_capable' must be true or false, got 'yes'",
        ),
        (
            {**GOOD, "infiniband": 1},
            "sizes[0] ('standard_x'): 'infiniband' must be true or false, got 1",
        ),
        ({**GOOD, "family": ""}, "sizes[0] ('standard_x'): 'family' must be a non-empty string"),
        ({**GOOD, "name": ""}, "sizes[0]: 'name' must be a non-empty string"),
        ("standard_x", "sizes[0] must be an object"),
    ],
)
def test_malformed_entries_are_reported_with_their_position(tmp_path, entry: object, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"header": {}, "sizes": [entry]}))

    with pytest.raises(CatalogError) as info:
        load_catalog(path)

    assert str(info.value) == f"{path}: {message}"


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(CatalogError) as info:
        VmCatalog.from_dict({"sizes": [GOOD, {**GOOD, "name": "STANDARD_X"}]})

    assert str(info.value) == "VM catalog lists 'standard_x' twice"


def test_document_without_sizes_is_rejected() -> None:
    with pytest.raises(CatalogError) as info:
        VmCatalog.from_dict({"header": {}}, origin="x.json")

    assert str(info.value) == "x.json: expected an object with a 'header' object and a 'sizes' list"


def test_invalid_json_is_reported(tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{")

    with pytest.raises(CatalogError) as info:
        load_catalog(path)

    assert str(info.value).startswith(f"{path}: not valid JSON (")


def test_describe() -> None:
    assert load_catalog().get("standard_e96s_v5").describe() == "standard_e96s_v5 (96 vCPU, 672 GiB, 0 GPU)"
    assert load_catalog().get("standard_nc64as_t4_v3").describe() == (
        "standard_nc64as_t4_v3 (64 vCPU, 440 GiB, 4 T4 GPU)"
    )
    assert VmSize("standard_y", "Y", 1, 0.75, 0.01).describe() == "standard_y (1 vCPU, 0.75 GiB, 0 GPU)"

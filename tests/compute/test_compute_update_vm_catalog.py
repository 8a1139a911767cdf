from __future__ import annotations

import datetime as dt
import importlib.util
import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "update_vm_catalog.py"


@pytest.fixture(scope="module")
def script() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("update_vm_catalog", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses/typing look modules up by name while the script executes.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _item(arm_sku: str, price: float, **overrides: object) -> dict:
    """One item shaped like a real Retail Prices API response row."""
    item = {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": "eastus",
        "location": "US East",
        "effectiveStartDate": "2023-04-01T00:00:00Z",
        "meterId": "00000000-0000-0000-0000-000000000000",
        "meterName": arm_sku.removeprefix("Standard_").replace("_", " "),
        "productId": "DZH318Z0BQ4L",
        "skuId": "DZH318Z0BQ4L/00CG",
        "productName": "Virtual Machines Series",
        "skuName": arm_sku.removeprefix("Standard_").replace("_", " "),
        "serviceName": "Virtual Machines",
        "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": arm_sku,
    }
    item.update(overrides)
    return item


CANNED_PAGE = {
    "BillingCurrency": "USD",
    "CustomerEntityId": "Default",
    "CustomerEntityType": "Retail",
    "Items": [
        _item("Standard_D2s_v3", 0.096, productName="Virtual Machines DSv3 Series"),
        _item("Standard_D2s_v3", 0.188, productName="Virtual Machines DSv3 Series Windows"),
        _item("Standard_D2s_v3", 0.0113, meterName="D2s v3 Spot", skuName="D2s v3 Spot"),
        _item("Standard_D2s_v3", 0.0192, meterName="D2s v3 Low Priority", skuName="D2s v3 Low Priority"),
        _item("Standard_D2s_v3", 0.05, type="DevTestConsumption"),
        _item("Standard_D2s_v3", 500.0, type="Reservation", reservationTerm="1 Year"),
        _item("Standard_D2s_v3", 70.08, unitOfMeasure="1 Month"),
        _item("Standard_NC4as_T4_v3", 0.45, isPrimaryMeterRegion=False),
        _item("Standard_NC4as_T4_v3", 0.526, productName="Virtual Machines NCasT4_v3 Series"),
        _item("Standard_NC4as_T4_v3", 0.40, serviceName="Cloud Services"),
        _item("Standard_E2_v5", 0.5, currencyCode="EUR"),
    ],
    "NextPageLink": None,
    "Count": 11,
}


@pytest.mark.parametrize(
    ("name", "arm"),
    [
        ("standard_d2s_v3", "Standard_D2s_v3"),
        ("standard_d96as_v5", "Standard_D96as_v5"),
        ("standard_f72s_v2", "Standard_F72s_v2"),
        ("standard_nc4as_t4_v3", "Standard_NC4as_T4_v3"),
        ("standard_nd96asr_v4", "Standard_ND96asr_v4"),
        ("standard_nd96amsr_a100_v4", "Standard_ND96amsr_A100_v4"),
        ("standard_nc80adis_h100_v5", "Standard_NC80adis_H100_v5"),
        ("standard_nv36adms_a10_v5", "Standard_NV36adms_A10_v5"),
        ("Standard_E96s_v5", "Standard_E96s_v5"),
    ],
)
def test_arm_sku_name(script: ModuleType, name: str, arm: str) -> None:
    assert script.arm_sku_name(name) == arm


@pytest.mark.parametrize("name", ["basic_a1", "standard_", "standard_2x"])
def test_arm_sku_name_rejects_unexpected_names(script: ModuleType, name: str) -> None:
    with pytest.raises(ValueError, match="VM size name"):
        script.arm_sku_name(name)


def test_build_filter(script: ModuleType) -> None:
    assert script.build_filter("eastus", ["Standard_D2s_v3", "Standard_NC4as_T4_v3"]) == (
        "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and priceType eq 'Consumption' "
        "and (armSkuName eq 'Standard_D2s_v3' or armSkuName eq 'Standard_NC4as_T4_v3')"
    )


def test_request_url_keeps_the_dollar_and_encodes_the_expression(script: ModuleType) -> None:
    assert script.request_url("eastus", ["Standard_D2s_v3"]) == (
        "https://prices.azure.com/api/retail/prices?$filter=serviceName%20eq%20%27Virtual%20Machines%27%20and"
        "%20armRegionName%20eq%20%27eastus%27%20and%20priceType%20eq%20%27Consumption%27%20and%20%28armSkuName"
        "%20eq%20%27Standard_D2s_v3%27%29"
    )


def test_parse_prices_keeps_only_linux_pay_as_you_go(script: ModuleType) -> None:
    assert script.parse_prices([CANNED_PAGE]) == {"standard_d2s_v3": 0.096, "standard_nc4as_t4_v3": 0.526}


def test_parse_prices_falls_back_to_non_primary_meters(script: ModuleType) -> None:
    page = {"Items": [_item("Standard_E2_v5", 0.13, isPrimaryMeterRegion=False)]}

    assert script.parse_prices([page]) == {"standard_e2_v5": 0.13}


def test_fetch_pages_follows_next_page_links(script: ModuleType) -> None:
    pages = {
        "u1": {"Items": [_item("Standard_D2s_v3", 0.096)], "NextPageLink": "u2"},
        "u2": {"Items": [_item("Standard_D4s_v3", 0.192)], "NextPageLink": None},
    }
    requested = []

    def get_json(url: str) -> dict:
        requested.append(url)
        return pages[url]

    result = script.parse_prices(script.fetch_pages("u1", get_json))

    assert requested == ["u1", "u2"]
    assert result == {"standard_d2s_v3": 0.096, "standard_d4s_v3": 0.192}


def _catalog() -> dict:
    return {
        "header": {
            "source": ["https://learn.microsoft.com/x"],
            "region": "eastus",
            "retrieved": "2020-01-01",
        },
        "sizes": [
            {"name": "standard_d2s_v3", "vcpus": 2, "hourly_usd": 0.1},
            {"name": "standard_x9_v1", "vcpus": 2, "hourly_usd": 0.2},
        ],
    }


def test_apply_prices_updates_prices_and_header(script: ModuleType) -> None:
    original = _catalog()

    updated, missing = script.apply_prices(
        original, {"standard_d2s_v3": 0.09612}, region="westeurope", today=dt.date(2026, 12, 1)
    )

    assert missing == ["standard_x9_v1"]
    assert updated == {
        "header": {
            "source": ["https://learn.microsoft.com/x"],
            "region": "westeurope",
            "retrieved": "2026-12-01",
            "prices_source": (
                "https://prices.azure.com/api/retail/prices (serviceName 'Virtual Machines', armRegionName "
                "'westeurope', priceType 'Consumption'; Windows, Spot and Low Priority meters excluded)"
            ),
            "prices_note": (
                "Linux pay-as-you-go retail prices in USD/hour for westeurope, retrieved 2026-12-01; "
                "no price found for standard_x9_v1 (kept the previous value); "
                "refresh with scripts/update_vm_catalog.py"
            ),
        },
        "sizes": [
            {"name": "standard_d2s_v3", "vcpus": 2, "hourly_usd": 0.0961},
            {"name": "standard_x9_v1", "vcpus": 2, "hourly_usd": 0.2},
        ],
    }
    assert original == _catalog()


def test_dump_catalog_writes_one_size_per_line(script: ModuleType) -> None:
    text = script.dump_catalog(_catalog())

    assert json.loads(text) == _catalog()
    assert '    {"name": "standard_d2s_v3", "vcpus": 2, "hourly_usd": 0.1},\n' in text
    assert text.endswith('{"name": "standard_x9_v1", "vcpus": 2, "hourly_usd": 0.2}\n  ]\n}\n')


def test_packaged_catalog_is_in_the_scripts_layout(script: ModuleType) -> None:
    # A refresh must only touch prices and header lines, not reformat the whole file.
    text = resources.files("airflow_provider_azbatch.compute").joinpath("data/vm_sizes.json").read_text()

    assert script.dump_catalog(json.loads(text)) == text


def test_main_refreshes_a_catalog_file(script: ModuleType, tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "vm_sizes.json"
    path.write_text(script.dump_catalog(_catalog()))
    urls = []

    def fake_get_json(url: str) -> dict:
        urls.append(url)
        return CANNED_PAGE

    monkeypatch.setattr(script, "_http_get_json", fake_get_json)

    status = script.main(["--catalog", str(path)])

    assert status == 1
    assert urls == [script.request_url("eastus", ["Standard_D2s_v3", "Standard_X9_v1"])]
    written = json.loads(path.read_text())
    assert [size["hourly_usd"] for size in written["sizes"]] == [0.096, 0.2]
    assert written["header"]["retrieved"] == dt.date.today().isoformat()
    assert capsys.readouterr().err == "priced 1 of 2 sizes for eastus\nno price for: standard_x9_v1\n"


def test_main_dry_run_does_not_write(script: ModuleType, tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "vm_sizes.json"
    catalog = _catalog()
    del catalog["sizes"][1]
    before = script.dump_catalog(catalog)
    path.write_text(before)
    monkeypatch.setattr(script, "_http_get_json", lambda url: CANNED_PAGE)

    status = script.main(["--catalog", str(path), "--dry-run"])

    assert status == 0
    assert path.read_text() == before
    assert json.loads(capsys.readouterr().out)["sizes"] == [
        {"name": "standard_d2s_v3", "vcpus": 2, "hourly_usd": 0.096}
    ]

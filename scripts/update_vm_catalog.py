#!/usr/bin/env python3
"""Refresh ``hourly_usd`` in the VM size catalog from the public Azure Retail Prices API.

    python scripts/update_vm_catalog.py [--catalog PATH] [--region eastus] [--dry-run]

Only prices change: sizes and specs are curated by hand from the learn.microsoft.com size pages. The
price kept per size is the Linux pay-as-you-go one (no Windows, Spot or Low Priority meters). Sizes the
API has no price for keep their old price and are listed on stderr; the exit status is then 1.

Standard library only, so it runs from a bare checkout without the provider's dependencies.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import re
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

API_URL = "https://prices.azure.com/api/retail/prices"
DEFAULT_CATALOG = (
    Path(__file__).resolve().parent.parent / "airflow_provider_azbatch" / "compute" / "data" / "vm_sizes.json"
)
# Keeps each request URL well under common URL length limits.
SKUS_PER_REQUEST = 20


def arm_sku_name(name: str) -> str:
    """``standard_nc4as_t4_v3`` -> ``Standard_NC4as_T4_v3``: the casing the price API stores.

    The catalog keeps Batch's lowercase names, but the API's filter may compare case-sensitively.
    """
    prefix, _, rest = name.lower().partition("_")
    if prefix != "standard" or not rest:
        raise ValueError(f"not a Standard_ VM size name: {name!r}")
    tokens = rest.split("_")
    head = re.fullmatch(r"([a-z]+)(\d.*)", tokens[0])
    if head is None:
        raise ValueError(f"unexpected VM size name: {name!r}")
    parts = [head.group(1).upper() + head.group(2)]
    parts += [tok if re.fullmatch(r"v\d+", tok) else tok.upper() for tok in tokens[1:]]
    return "_".join(["Standard", *parts])


def build_filter(region: str, arm_sku_names: Sequence[str]) -> str:
    skus = " or ".join(f"armSkuName eq '{sku}'" for sku in arm_sku_names)
    return (
        f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and priceType eq 'Consumption' and ({skus})"
    )


def request_url(region: str, arm_sku_names: Sequence[str]) -> str:
    # '$filter' must keep its literal '$'; only the expression is percent-encoded.
    return f"{API_URL}?$filter={urllib.parse.quote(build_filter(region, arm_sku_names))}"


def _http_get_json(url: str) -> Mapping[str, Any]:
    request = urllib.request.Request(url, headers={"User-Agent": "airflow-provider-azbatch catalog update"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def fetch_pages(url: str, get_json: Callable[[str], Mapping[str, Any]] | None = None) -> Iterator[Mapping[str, Any]]:
    """Yield every page of a query, following ``NextPageLink``."""
    get_json = get_json or _http_get_json
    next_url: str | None = url
    while next_url:
        page = get_json(next_url)
        yield page
        next_url = page.get("NextPageLink")


def _is_linux_pay_as_you_go(item: Mapping[str, Any]) -> bool:
    meter = f"{item.get('meterName', '')} {item.get('skuName', '')}"
    return (
        item.get("serviceName") == "Virtual Machines"
        and item.get("type", item.get("priceType")) == "Consumption"
        and item.get("unitOfMeasure") == "1 Hour"
        and item.get("currencyCode", "USD") == "USD"
        and "Spot" not in meter
        and "Low Priority" not in meter
        and "Windows" not in str(item.get("productName", ""))
        and bool(item.get("armSkuName"))
    )


def parse_prices(pages: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Map lowercase VM size name -> Linux pay-as-you-go USD/hour from API response pages.

    When a size has several qualifying meters, primary-region meters win, then the lowest price.
    """
    candidates: dict[str, list[tuple[bool, float]]] = {}
    for page in pages:
        for item in page.get("Items", []):
            if _is_linux_pay_as_you_go(item):
                key = str(item["armSkuName"]).lower()
                primary = item.get("isPrimaryMeterRegion", True) is not False
                candidates.setdefault(key, []).append((primary, float(item["retailPrice"])))
    prices = {}
    for key, found in candidates.items():
        primary_prices = [price for primary, price in found if primary]
        prices[key] = min(primary_prices or [price for _, price in found])
    return prices


def apply_prices(
    catalog: Mapping[str, Any], prices: Mapping[str, float], *, region: str, today: dt.date
) -> tuple[dict[str, Any], list[str]]:
    """Return (updated catalog, names of sizes the API had no price for)."""
    updated = copy.deepcopy(dict(catalog))
    missing = []
    for size in updated["sizes"]:
        price = prices.get(size["name"].lower())
        if price is None:
            missing.append(size["name"])
        else:
            size["hourly_usd"] = round(price, 4)
    header = updated.setdefault("header", {})
    header["region"] = region
    header["retrieved"] = today.isoformat()
    header["prices_source"] = (
        f"{API_URL} (serviceName 'Virtual Machines', armRegionName '{region}', priceType 'Consumption';"
        " Windows, Spot and Low Priority meters excluded)"
    )
    note = f"Linux pay-as-you-go retail prices in USD/hour for {region}, retrieved {today.isoformat()}"
    if missing:
        note += f"; no price found for {', '.join(missing)} (kept the previous value)"
    header["prices_note"] = note + "; refresh with scripts/update_vm_catalog.py"
    return updated, missing


def dump_catalog(catalog: Mapping[str, Any]) -> str:
    """Serialise with one size per line so price refreshes give one-line diffs."""
    lines = ["{"]
    for key, value in catalog.items():
        if key != "sizes":
            rendered = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
            lines.append(f"  {json.dumps(key)}: {rendered},")
    rows = [f"    {json.dumps(size, ensure_ascii=False)}" for size in catalog.get("sizes", [])]
    lines.append('  "sizes": [')
    if rows:
        lines.append(",\n".join(rows))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    parser.add_argument("--region", help="armRegionName to price (default: the catalog header's region)")
    parser.add_argument("--dry-run", action="store_true", help="print the result instead of writing it")
    args = parser.parse_args(argv)

    catalog = json.loads(args.catalog.read_text(encoding="utf-8"))
    region = args.region or catalog.get("header", {}).get("region") or "eastus"
    names = [arm_sku_name(size["name"]) for size in catalog["sizes"]]
    prices: dict[str, float] = {}
    for start in range(0, len(names), SKUS_PER_REQUEST):
        url = request_url(region, names[start : start + SKUS_PER_REQUEST])
        prices.update(parse_prices(fetch_pages(url)))

    updated, missing = apply_prices(catalog, prices, region=region, today=dt.date.today())
    text = dump_catalog(updated)
    if args.dry_run:
        sys.stdout.write(text)
    else:
        args.catalog.write_text(text, encoding="utf-8")
    print(f"priced {len(names) - len(missing)} of {len(names)} sizes for {region}", file=sys.stderr)
    if missing:
        print(f"no price for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What docs/tutorials/gpu-training.md states about the training step's pool: the VM size each variant's resources
pick, what a pool of its nodes costs an hour (the catalog's list prices) and the vCPU quota it needs."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torchx", reason="the training example needs the [torchx] extra")

from airflow_provider_azbatch.compute.catalog import load_catalog
from airflow_provider_azbatch.compute.requirements import select_vm_size
from airflow_provider_azbatch.torchx.resources import requirements_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorials" / "gpu-training.md"


def _module(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trainer():  # type: ignore[no-untyped-def]
    dag = _module(ROOT / "example_dags" / "example_azbatch_training.py").dag
    (role,) = dag.get_task("train").app.roles
    return role


def _page() -> str:
    return " ".join(PAGE.read_text(encoding="utf-8").split())


@pytest.mark.parametrize(
    ("variant", "size", "nodes_per_hour", "vcpus"),
    [("example", "standard_nc96ads_a100_v4", "$29.38", 192), ("t4", "standard_nc4as_t4_v3", "$1.05", 8)],
)
def test_the_page_states_the_size_price_and_quota_of_each_variant(variant, size, nodes_per_hour, vcpus):
    role = _trainer()
    if variant == "t4":
        role = replace(role, resource=_module(ROOT / "docs" / "examples" / "gpu_training_t4.py").resource)
    requirements, vm_size = requirements_of(role)
    assert vm_size is None
    chosen = select_vm_size(requirements)
    assert chosen.name == size
    assert f"{role.num_replicas * chosen.hourly_usd:.2f}" == nodes_per_hour.removeprefix("$")
    assert role.num_replicas * chosen.vcpus == vcpus
    page = _page()
    assert f"`{size}`" in page
    assert f"{nodes_per_hour} an hour" in page
    assert f"{vcpus} vCPUs of the {chosen.family} family" in page
    assert f"${chosen.hourly_usd:.2f} an hour a node" in page


def test_the_catalog_the_prices_come_from_is_the_one_the_page_names():
    catalog = load_catalog()
    assert f"as of {catalog.retrieved}" in _page()


def test_the_pages_name_the_size_one_vcpu_picks_and_its_vcpus():
    """`{"cpus": 1}` (the hello example's and the system tests' pools) picks a 2-vCPU size: the catalog has none
    with one, and the pages say so rather than "a 1-vCPU size"."""
    from airflow_provider_azbatch.compute.requirements import ResourceRequirements

    chosen = select_vm_size(ResourceRequirements(cpus=1))
    assert (chosen.name, chosen.vcpus) == ("standard_f2s_v2", 2)
    assert min(size.vcpus for size in load_catalog().sizes) == 2
    for page in ("tutorials/first-job.md", "howto/azure-setup.md", "howto/system-tests.md"):
        text = " ".join((ROOT / "docs" / page).read_text(encoding="utf-8").split())
        assert "`standard_f2s_v2`" in text, page
        assert "2 vCPUs" in text, page
        assert f"${chosen.hourly_usd:.2f} an hour" in text or page == "tutorials/first-job.md", page

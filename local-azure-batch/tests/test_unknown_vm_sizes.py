"""A pool or auto-pool naming a VM size Batch does not know is refused before anything exists (model/vm_sizes.py)."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from local_azure_batch.testing import run_local_batch_service
from tests import sdk_models

TYPO = "standard_nc4as_t4_v9"
MESSAGE = "The value provided for one of the properties in the request body is invalid."


def _assert_refused_size(error: HttpResponseError, name: str) -> None:
    assert error.status_code == 400
    assert error.error is not None
    assert error.error.code == "InvalidPropertyValue"
    assert error.model.message.value.startswith(f"{MESSAGE}\nRequestId:")
    assert [(detail.key, detail.value) for detail in error.model.error_values] == [
        ("PropertyName", "vmSize"),
        ("PropertyValue", name),
        ("Reason", f"The specified vmSize '{name}' is not a virtual machine size the Batch service supports."),
    ]


def test_a_pool_with_an_unknown_size_is_refused_and_not_created(batch_client):
    options = sdk_models.pool("typo-pool")
    options.vm_size = TYPO
    with pytest.raises(HttpResponseError) as caught:
        batch_client.create_pool(options)
    _assert_refused_size(caught.value, TYPO)
    with pytest.raises(ResourceNotFoundError):
        batch_client.get_pool("typo-pool")


def test_a_job_whose_auto_pool_has_an_unknown_size_is_refused_and_creates_nothing(batch_client):
    pools_before = {pool.id for pool in batch_client.list_pools(select=["id"])}
    info = sdk_models.auto_pool_info()
    info.auto_pool_specification.pool.vm_size = "Standard_NC4as_T4_v9"
    with pytest.raises(HttpResponseError) as caught:
        batch_client.create_job(m.BatchJobCreateOptions(id="typo-job", pool_info=info))
    _assert_refused_size(caught.value, "Standard_NC4as_T4_v9")
    with pytest.raises(ResourceNotFoundError):
        batch_client.get_job("typo-job")
    assert {pool.id for pool in batch_client.list_pools(select=["id"])} == pools_before


def test_sizes_are_compared_case_insensitively_and_reported_in_lower_case(batch_client):
    options = sdk_models.pool("cased-size", nodes=0)
    options.vm_size = "Standard_D2S_V3"
    batch_client.create_pool(options)
    assert batch_client.get_pool("cased-size").vm_size == "standard_d2s_v3"
    batch_client.begin_delete_pool("cased-size", polling_interval=1).result()


def test_a_size_newer_than_the_list_is_accepted_when_the_service_is_told_of_it():
    with run_local_batch_service(extra_args=["--vm-size", "Standard_X9_v9", "--quiet"]) as service:
        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        options = sdk_models.pool("newer", nodes=0)
        options.vm_size = "standard_x9_v9"
        client.create_pool(options)
        assert client.get_pool("newer").vm_size == "standard_x9_v9"
        client.close()


def test_the_shipped_list_names_its_sources_and_holds_lower_case_names_once():
    data = json.loads(resources.files("local_azure_batch").joinpath("data/vm_sizes.json").read_text())
    names = data["names"]
    assert names == sorted(set(names))
    assert all(name == name.lower() and name.startswith(("standard_", "basic_")) for name in names)
    assert {"standard_d2_v2", "standard_d2s_v3", "standard_nc4as_t4_v3", "standard_hb120rs_v3"} <= set(names)
    assert TYPO not in names
    assert all(source["retrieved"] and source["path"] for source in data["sources"])

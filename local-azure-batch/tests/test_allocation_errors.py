"""Pools that cannot get all their nodes (--node-quota), and autoscale formulas evaluated at creation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential

from local_azure_batch.testing import run_local_batch_service
from tests import sdk_models
from tests.helpers import wait_until


@pytest.fixture
def quota_client():
    """A service whose account holds at most three nodes."""
    with run_local_batch_service(extra_args=["--node-quota", "3", "--quiet"]) as service:
        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        yield client
        client.close()


def _steady(client, pool_id):
    pool = client.get_pool(pool_id)
    return pool.allocation_state == m.AllocationState.STEADY and pool


def test_a_pool_beyond_the_quota_gets_what_fits_and_a_resize_error(quota_client):
    client = quota_client
    client.create_pool(sdk_models.pool("first", nodes=2))
    client.create_pool(sdk_models.pool("second", nodes=4, target_low_priority_nodes=1))
    pool = wait_until(lambda: _steady(client, "second"), what="second pool steady")
    assert (pool.current_dedicated_nodes, pool.target_dedicated_nodes) == (1, 4)
    assert (pool.current_low_priority_nodes, pool.target_low_priority_nodes) == (0, 1)
    assert [(error.code, error.message) for error in pool.resize_errors] == [
        ("AccountCoreQuotaReached", "The specified account has reached core quota"),
        ("AccountLowPriorityCoreQuotaReached", "The specified account has reached low priority core quota"),
    ]
    assert _steady(client, "first").resize_errors is None

    # Nodes given back count again: the next resize reaches its target and clears the errors.
    client.begin_resize_pool("first", m.BatchPoolResizeOptions(target_dedicated_nodes=0), polling_interval=1).result()
    wait_until(lambda: not list(client.list_nodes("first")), what="first pool empty")
    client.begin_resize_pool(
        "second",
        m.BatchPoolResizeOptions(target_dedicated_nodes=3, target_low_priority_nodes=0),
        polling_interval=1,
    ).result()
    pool = wait_until(lambda: _steady(client, "second"), what="second pool steady again")
    assert (pool.current_dedicated_nodes, pool.resize_errors) == (3, None)
    for pool_id in ("first", "second"):
        client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_an_auto_pool_beyond_the_quota_also_reports_it(quota_client):
    client = quota_client
    client.create_job(m.BatchJobCreateOptions(id="auto", pool_info=sdk_models.auto_pool_info(nodes=5)))
    pool_id = client.get_job("auto").execution_info.pool_id
    pool = wait_until(lambda: _steady(client, pool_id), what="auto pool steady")
    assert pool.current_dedicated_nodes == 3
    assert [error.code for error in pool.resize_errors] == ["AccountCoreQuotaReached"]
    client.begin_delete_job("auto", polling_interval=1).result()


FORMULA = (
    "$TargetDedicatedNodes = max(0, min(3, $PendingTasks.GetSample(1))); $NodeDeallocationOption = taskcompletion;"
)


def test_autoscale_formula_reading_samples_evaluates_at_creation(batch_client):
    client = batch_client
    options = sdk_models.pool(
        "autoscale-at-creation",
        enable_auto_scale=True,
        auto_scale_formula=FORMULA,
        auto_scale_evaluation_interval=timedelta(minutes=5),
    )
    options.target_dedicated_nodes = None
    client.create_pool(options)
    run = client.get_pool("autoscale-at-creation").auto_scale_run
    assert run.error is None
    assert run.results.startswith("$TargetDedicatedNodes=0;")
    client.begin_delete_pool("autoscale-at-creation", polling_interval=1).result()

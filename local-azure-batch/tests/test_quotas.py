"""--job-quota and --pool-quota: the account's active job and pool quotas, refused as the service refuses them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ResourceExistsError

from local_azure_batch.testing import run_local_batch_service
from tests import sdk_models
from tests.helpers import wait_until

JOB_QUOTA_MESSAGE = "Active job and schedule quota for the account has been reached."
POOL_QUOTA_MESSAGE = "Pool quota for the account has been reached."


@pytest.fixture
def service():
    with run_local_batch_service(extra_args=["--quiet", "--job-quota", "2", "--pool-quota", "1"]) as s:
        yield s


@pytest.fixture
def client(service):
    client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
    yield client
    client.close()


def _job(job_id: str) -> m.BatchJobCreateOptions:
    return m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="nowhere"))


def _refused(create, code: str, message: str) -> None:
    # 409: the SDK raises ResourceExistsError, as for any conflict.
    with pytest.raises(ResourceExistsError) as caught:
        create()
    assert caught.value.status_code == 409
    assert caught.value.error.code == code
    assert caught.value.model.message.value.startswith(f"{message}\nRequestId:")


def test_the_job_quota_counts_every_job_until_it_completes(service, client):
    client.create_job(_job("first"))
    client.create_job(_job("second"))
    _refused(lambda: client.create_job(_job("third")), "ActiveJobAndScheduleQuotaReached", JOB_QUOTA_MESSAGE)
    # A disabled job is still an active job for the quota.
    client.begin_disable_job(
        "first", m.BatchJobDisableOptions(disable_tasks=m.DisableBatchJobOption.REQUEUE), polling_interval=1
    ).result()
    _refused(lambda: client.create_job(_job("third")), "ActiveJobAndScheduleQuotaReached", JOB_QUOTA_MESSAGE)
    # A completed one is not.
    client.begin_terminate_job(
        "first", BatchJobTerminateOptions(termination_reason="done"), polling_interval=1
    ).result()
    client.create_job(_job("third"))
    _refused(lambda: client.create_job(_job("fourth")), "ActiveJobAndScheduleQuotaReached", JOB_QUOTA_MESSAGE)
    # Nor is a job being deleted.
    client.begin_delete_job("second", polling_interval=1)
    client.create_job(_job("fourth"))
    assert service.quota() == {"jobs": 2, "pools": 1, "nodes": None}


def test_the_job_quota_changes_at_runtime(service, client):
    client.create_job(_job("first"))
    assert service.set_quota(jobs=1) == {"jobs": 1, "pools": 1, "nodes": None}
    _refused(lambda: client.create_job(_job("second")), "ActiveJobAndScheduleQuotaReached", JOB_QUOTA_MESSAGE)
    # A job that ends because its tasks did frees its place, like one terminated by hand.
    client.update_job(
        "first", m.BatchJobUpdateOptions(all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB)
    )
    client.create_task("first", m.BatchTaskCreateOptions(id="t", command_line="true"))
    client.terminate_task("first", "t")
    wait_until(lambda: client.get_job("first").state == m.BatchJobState.COMPLETED, what="first job completed")
    client.create_job(_job("second"))
    service.set_quota(jobs=None)
    for number in range(3, 6):
        client.create_job(_job(f"job-{number}"))
    assert len(list(client.list_jobs())) == 5


def test_the_pool_quota(service, client):
    client.create_pool(sdk_models.pool("first", nodes=0))
    _refused(lambda: client.create_pool(sdk_models.pool("second", nodes=0)), "PoolQuotaReached", POOL_QUOTA_MESSAGE)
    # A pool counts until it is gone.
    client.begin_delete_pool("first", polling_interval=1).result()
    client.create_pool(sdk_models.pool("second", nodes=0))
    service.set_quota(pools=2)
    client.create_pool(sdk_models.pool("third", nodes=0))
    _refused(lambda: client.create_pool(sdk_models.pool("fourth", nodes=0)), "PoolQuotaReached", POOL_QUOTA_MESSAGE)
    assert sorted(pool.id for pool in client.list_pools()) == ["second", "third"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"jobs": -1}, "jobs must be null or a whole number from 0"),
        ({"jobs": "5"}, "jobs must be null or a whole number from 0"),
        ({"tasks": 5}, "give an object with any of jobs, pools, nodes"),
    ],
)
def test_quota_admin_endpoint_rejects_bad_values(service, body, error):
    request = urllib.request.Request(f"{service.url}/_emulator/quota", method="PUT", data=json.dumps(body).encode())
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    assert json.loads(caught.value.read()) == {"error": error}
    assert service.quota() == {"jobs": 2, "pools": 1, "nodes": None}

"""drop-after: the request takes effect, then the connection closes without an answer."""

from __future__ import annotations

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ResourceExistsError, ServiceResponseError

from local_azure_batch.testing import run_local_batch_service


@pytest.fixture
def service():
    with run_local_batch_service(
        extra_args=["--quiet", "--faults", "Jobs_CreateJob:drop-after#1;Jobs_GetJob:drop-after#1"]
    ) as s:
        yield s


def _job(job_id: str) -> m.BatchJobCreateOptions:
    return m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="nowhere"))


def test_a_dropped_create_job_still_created_the_job(service):
    client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
    # The SDK does not retry a POST whose answer was lost: the caller sees the connection error...
    with pytest.raises(ServiceResponseError):
        client.create_job(_job("lost-answer"))
    # ...although the job exists. A GET is retried, so the one dropped after it was served goes unnoticed.
    assert client.get_job("lost-answer").state == m.BatchJobState.ACTIVE
    assert service.request_counts() == {"Jobs_CreateJob": 1, "Jobs_GetJob": 2}
    # Trying the create again, as a caller unsure whether it worked would, meets the job.
    with pytest.raises(ResourceExistsError) as exists:
        client.create_job(_job("lost-answer"))
    assert exists.value.error.code == "JobExists"
    client.close()


def test_drop_closes_before_the_request_is_processed(service):
    service.set_faults("Jobs_CreateJob:drop#1")
    client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
    with pytest.raises(ServiceResponseError):
        client.create_job(_job("never-created"))
    assert [job.id for job in client.list_jobs()] == []
    client.close()

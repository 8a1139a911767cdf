"""GET /_emulator/requests: the latest requests, each with its time, operation, job and status."""

from __future__ import annotations

import time

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ResourceNotFoundError

from local_azure_batch.testing import run_local_batch_service


def _client(service):
    return BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))


def _job(client, job_id: str) -> None:
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="nowhere")))


def test_each_request_is_logged_with_its_job_operation_and_status():
    with run_local_batch_service(extra_args=["--quiet"]) as service, _client(service) as client:
        before = time.time()
        _job(client, "logged-a")
        _job(client, "logged-b")
        client.get_job_task_counts("logged-a")
        client.get_job_task_counts("logged-a")
        client.begin_terminate_job(
            "logged-b", BatchJobTerminateOptions(termination_reason="Done"), polling_interval=1
        ).result()
        with pytest.raises(ResourceNotFoundError):
            client.get_job_task_counts("missing")
        list(client.list_pools())
        after = time.time()

        log = service.request_log()
        assert all(before <= record["at"] <= after for record in log)
        assert [record["at"] for record in log] == sorted(record["at"] for record in log)
        assert [(record["operation"], record["job"], record["status"]) for record in log][:4] == [
            # The job a request names in its path: a new job's id is in the body of its create request.
            ("Jobs_CreateJob", None, 201),
            ("Jobs_CreateJob", None, 201),
            ("Jobs_GetJobTaskCounts", "logged-a", 200),
            ("Jobs_GetJobTaskCounts", "logged-a", 200),
        ]
        assert ("Jobs_TerminateJob", "logged-b", 202) in [(r["operation"], r["job"], r["status"]) for r in log]
        assert ("Jobs_GetJobTaskCounts", "missing", 404) in [(r["operation"], r["job"], r["status"]) for r in log]
        assert log[-1]["operation"] == "Pools_ListPools"
        assert log[-1]["job"] is None

        # Filters: by job, by operation, both (each repeatable).
        assert [r["operation"] for r in service.request_log(jobs=["logged-a"])] == [
            "Jobs_GetJobTaskCounts",
            "Jobs_GetJobTaskCounts",
        ]
        terminates = service.request_log(operations=["Jobs_TerminateJob"])
        assert [r["job"] for r in terminates] == ["logged-b"]
        counted = service.request_log(jobs=["logged-a", "missing"], operations=["Jobs_GetJobTaskCounts"])
        assert [r["job"] for r in counted] == ["logged-a", "logged-a", "missing"]

        service.clear_request_log()
        client.get_job_task_counts("logged-a")
        assert [r["operation"] for r in service.request_log()] == ["Jobs_GetJobTaskCounts"]


def test_the_log_keeps_only_the_latest_requests():
    with (
        run_local_batch_service(extra_args=["--quiet", "--request-log", "3"]) as service,
        _client(service) as client,
    ):
        _job(client, "kept")
        for _ in range(5):
            client.get_job_task_counts("kept")
        log = service.request_log()
        assert [(r["operation"], r["job"]) for r in log] == [("Jobs_GetJobTaskCounts", "kept")] * 3

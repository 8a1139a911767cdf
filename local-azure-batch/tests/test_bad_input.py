"""Requests the service refuses: answered in its JSON error shape with the right status, never a 500."""

from __future__ import annotations

import uuid

import pytest
from azure.batch import models as m
from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from tests.helpers import wait_until

# Just over the documented limit of an add task collection (less than 1 MB) with 100 tasks of this size.
PAYLOAD = "x" * 11_000


def _job(client, pool_id: str = "nowhere") -> str:
    job_id = f"bad-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    return job_id


def _assert_service_error(error: HttpResponseError, status: int, code: str, message: str) -> None:
    assert error.status_code == status
    assert error.error is not None
    assert error.error.code == code
    value = error.model.message.value
    assert value.startswith(f"{message}\nRequestId:")
    assert "\nTime:" in value


def test_a_nul_in_a_task_file_path_is_a_400(batch_client, shared_pool, local_batch_service):
    client = batch_client
    job_id = _job(client, shared_pool)
    client.create_task(job_id, m.BatchTaskCreateOptions(id="t", command_line="echo hi"))
    wait_until(lambda: client.get_task(job_id, "t").state == m.BatchTaskState.COMPLETED, what="task done")
    for call in (
        lambda: client.delete_task_file(job_id, "t", "wd/\x00"),
        lambda: list(client.list_task_files(job_id, "t\x00")),
    ):
        with pytest.raises(HttpResponseError) as caught:
            call()
        _assert_service_error(
            caught.value, 400, "InvalidUri", "The requested URI does not represent any resource on the server."
        )
        assert caught.value.model.error_values[0].key == "Reason"
    # A download streams, so the SDK does not read the error body; HEAD answers have none.
    for call in (
        lambda: b"".join(client.download_task_file(job_id, "t", "std\x00out.txt")),
        lambda: client.get_task_file_properties(job_id, "t", "stdout\x00"),
    ):
        with pytest.raises(HttpResponseError) as caught:
            call()
        assert caught.value.status_code == 400
    assert "Traceback" not in local_batch_service.log_text()
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_a_nul_in_a_node_file_path_is_a_400_with_the_whole_error_body(batch_client, shared_pool):
    client = batch_client
    node = next(iter(client.list_nodes(shared_pool)))
    request = HttpRequest(
        "GET", f"/pools/{shared_pool}/nodes/{node.id}/files/start%00up", params={"api-version": "2025-06-01"}
    )
    with pytest.raises(HttpResponseError) as caught:
        client.send_request(request)
    response = caught.value.response
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json; odata=minimalmetadata"
    body = response.json()
    assert list(body) == ["odata.metadata", "code", "message", "values"]
    assert body["odata.metadata"].endswith(
        "/$metadata#Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element"
    )
    assert body["code"] == "InvalidUri"
    assert body["message"]["lang"] == "en-US"
    assert body["message"]["value"].startswith("The requested URI does not represent any resource on the server.\n")
    assert body["values"] == [
        {"key": "Reason", "value": "The filePath contains a character that is not allowed (U+0000)."}
    ]


def test_a_task_collection_over_one_megabyte_is_413_request_body_too_large(batch_client):
    client = batch_client
    job_id = _job(client)
    tasks = [
        m.BatchTaskCreateOptions(
            id=f"t{i}", command_line="true", environment_settings=[m.EnvironmentSetting(name="P", value=PAYLOAD)]
        )
        for i in range(100)
    ]
    with pytest.raises(HttpResponseError) as caught:
        client.create_task_collection(job_id, m.BatchTaskGroup(task_values=tasks))
    _assert_service_error(
        caught.value, 413, "RequestBodyTooLarge", "The size of the request body exceeds the maximum size permitted."
    )
    assert list(client.list_tasks(job_id)) == []
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_create_tasks_splits_a_collection_that_is_too_large(batch_client, local_batch_service):
    client = batch_client
    job_id = _job(client)
    tasks = [
        m.BatchTaskCreateOptions(
            id=f"t{i:03d}", command_line="true", environment_settings=[m.EnvironmentSetting(name="P", value=PAYLOAD)]
        )
        for i in range(100)
    ]
    before = local_batch_service.request_counts().get("Tasks_CreateTaskCollection", 0)
    result = client.create_tasks(job_id, tasks)
    assert len(result.result_values) == 100
    assert {item.status for item in result.result_values} == {m.BatchTaskAddStatus.SUCCESS}
    assert sorted(task.id for task in client.list_tasks(job_id, select=["id"])) == [f"t{i:03d}" for i in range(100)]
    # One refused collection of 100, then two of 50.
    assert local_batch_service.request_counts()["Tasks_CreateTaskCollection"] - before == 3
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_any_request_body_over_the_limit_is_413(batch_client):
    client = batch_client
    job_id = _job(client)
    task = m.BatchTaskCreateOptions(
        id="huge", command_line="true", environment_settings=[m.EnvironmentSetting(name="P", value="x" * 1_100_000)]
    )
    with pytest.raises(HttpResponseError) as caught:
        client.create_task(job_id, task)
    _assert_service_error(
        caught.value, 413, "RequestBodyTooLarge", "The size of the request body exceeds the maximum size permitted."
    )
    client.begin_delete_job(job_id, polling_interval=1).result()

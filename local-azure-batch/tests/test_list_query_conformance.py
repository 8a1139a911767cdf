"""Every list the service serves, through the SDK: what its $filter, $select and $expand allow; the 400 for the rest.

The rules and the sources of each are in local_azure_batch/rest/query_options.py (and the README's "Lists:
$filter, $select and $expand"); test_filter_rules.py covers each rule without HTTP.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from azure.batch import models as m
from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from tests.helpers import wait_until

INVALID_QUERY = "Value for one of the query parameters specified in the request URI is invalid."
UNSUPPORTED = "One of the query parameters specified in the request URI is not supported."


@pytest.fixture(scope="module")
def finished_job(batch_client, shared_pool):
    """A job on the shared pool with a task that succeeded and one that failed."""
    client = batch_client
    job_id = f"q-{uuid.uuid4().hex[:8]}"
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=shared_pool)))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="good", command_line="true"))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="bad", command_line="false"))
    wait_until(
        lambda: all(task.state == m.BatchTaskState.COMPLETED for task in client.list_tasks(job_id)),
        what="both tasks completed",
    )
    yield job_id
    client.begin_delete_job(job_id, polling_interval=1).result()


def _refused(call: Any, code: str, message: str, values: list[tuple[str, str]]) -> None:
    with pytest.raises(HttpResponseError) as caught:
        call()
    error = caught.value
    assert error.status_code == 400
    assert error.error is not None
    assert error.error.code == code
    assert error.model.message.value.startswith(f"{message}\nRequestId:")
    assert [(detail.key, detail.value) for detail in error.model.error_values] == values


def _invalid_filter(call: Any, text: str, reason: str) -> None:
    _refused(
        call,
        "InvalidQueryParameterValue",
        INVALID_QUERY,
        [("QueryParameterName", "$filter"), ("QueryParameterValue", text), ("Reason", reason)],
    )


def test_list_jobs(batch_client, finished_job):
    client = batch_client
    prefix = finished_job[:6]
    assert [job.id for job in client.list_jobs(filter=f"startswith(id, '{prefix}') and state eq 'active'")] == [
        finished_job
    ]
    # The look an account view makes: what changed since a time, on the service's own clock.
    created = client.get_job(finished_job).creation_time
    since = f"datetime'{created.strftime('%Y-%m-%dT%H:%M:%S')}Z'"
    changed = client.list_jobs(
        filter=f"(state eq 'active' or state eq 'completed') and (stateTransitionTime ge {since} "
        f"or lastModified ge {since}) and startswith(id, '{prefix}')",
        select=["id", "state", "stateTransitionTime", "lastModified", "executionInfo"],
    )
    [job] = list(changed)
    assert (job.id, job.display_name) == (finished_job, None)
    assert list(client.list_jobs(filter=f"id eq '{finished_job}' and creationTime lt {since}")) == []
    rfc1123 = created.strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert [
        job.id for job in client.list_jobs(filter=f"id eq '{finished_job}' and creationTime ge DateTime'{rfc1123}'")
    ] == [finished_job]
    _invalid_filter(
        lambda: list(client.list_jobs(filter="state eq 'failed'")),
        "state eq 'failed'",
        "'failed' is not a value of 'state': active, disabling, disabled, enabling, terminating, completed, deleting "
        "(at position 9)",
    )


def test_list_tasks(batch_client, finished_job):
    client = batch_client
    failed = client.list_tasks(
        finished_job,
        filter="state eq 'completed' and executionInfo/result eq 'failure'",
        select=["id", "executionInfo"],
    )
    assert [task.id for task in failed] == ["bad"]
    assert [task.id for task in client.list_tasks(finished_job, filter="id eq 'good' or id eq 'bad'")] == [
        "bad",
        "good",
    ]
    assert [task.id for task in client.list_tasks(finished_job, filter="executionInfo/exitCode ne 0")] == ["bad"]
    _invalid_filter(
        lambda: list(client.list_tasks(finished_job, filter="nodeInfo/poolId eq 'shared'")),
        "nodeInfo/poolId eq 'shared'",
        "List Tasks cannot filter on 'nodeInfo/poolId'; its filterable properties (names are case-sensitive) are: "
        "creationTime, executionInfo/endTime, executionInfo/exitCode, executionInfo/result, executionInfo/startTime, "
        "id, lastModified, lastModifiedTime, state, stateTransitionTime (at position 0)",
    )


def test_list_pools(batch_client, shared_pool):
    client = batch_client
    pools = client.list_pools(
        filter="startswith(id, 'shar') and state eq 'active'", select=["id", "state"], expand=["stats"]
    )
    assert [(pool.id, pool.vm_size) for pool in pools] == [(shared_pool, None)]
    assert [
        pool.id for pool in client.list_pools(filter="vmSize eq 'STANDARD_D2S_V3' and enableAutoScale eq false")
    ] == [shared_pool]
    _invalid_filter(
        lambda: list(client.list_pools(filter="vmSize ge 'standard'")),
        "vmSize ge 'standard'",
        "List Pools allows only eq, ne on 'vmSize', not 'ge' (at position 0)",
    )


def test_list_nodes_and_node_counts(batch_client, shared_pool):
    client = batch_client
    nodes = client.list_nodes(shared_pool, filter="state eq 'idle' or state eq 'running'", select=["id", "state"])
    assert len(list(nodes)) == 2
    _invalid_filter(
        lambda: list(client.list_nodes(shared_pool, filter="id eq 'tvm-1'")),
        "id eq 'tvm-1'",
        "List Nodes cannot filter on 'id'; its filterable properties (names are case-sensitive) are: allocationTime, "
        "lastBootTime, startTaskInfo/endTime, startTaskInfo/exitCode, startTaskInfo/result, startTaskInfo/startTime, "
        "startTaskInfo/state, state, stateTransitionTime (at position 0)",
    )
    assert [counts.pool_id for counts in client.list_pool_node_counts(filter=f"poolId eq '{shared_pool}'")] == [
        shared_pool
    ]
    _invalid_filter(
        lambda: list(client.list_pool_node_counts(filter="startswith(poolId, 'sh')")),
        "startswith(poolId, 'sh')",
        "List Pool Node Counts allows only eq on 'poolId', not startswith (at position 0)",
    )


def test_list_task_and_node_files(batch_client, shared_pool, finished_job):
    client = batch_client
    files = client.list_task_files(finished_job, "good", filter="startswith(name, 'std')")
    assert sorted(file.name for file in files) == ["stderr.txt", "stdout.txt"]
    _invalid_filter(
        lambda: list(client.list_task_files(finished_job, "good", filter="name eq 'stdout.txt'")),
        "name eq 'stdout.txt'",
        "List Task Files allows only startswith on 'name', not 'eq' (at position 0)",
    )
    node_id = client.get_task(finished_job, "good").node_info.node_id
    assert [file.name for file in client.list_node_files(shared_pool, node_id, filter="startswith(name, 'work')")] == [
        "workitems"
    ]
    _invalid_filter(
        lambda: list(client.list_node_files(shared_pool, node_id, filter="isDirectory eq true")),
        "isDirectory eq true",
        "List Node Files cannot filter on 'isDirectory'; its filterable properties (names are case-sensitive) are: "
        "name (at position 0)",
    )


def test_list_preparation_and_release_status(batch_client, finished_job):
    client = batch_client
    listed = client.list_job_preparation_and_release_task_status(
        finished_job, filter="jobPreparationTaskExecutionInfo/result eq 'failure'", select=["nodeId"]
    )
    assert list(listed) == []
    _invalid_filter(
        lambda: list(client.list_job_preparation_and_release_task_status(finished_job, filter="nodeUrl eq 'x'")),
        "nodeUrl eq 'x'",
        "List Job Preparation and Release Task Status cannot filter on 'nodeUrl'; its filterable properties (names "
        "are case-sensitive) are: jobPreparationTaskExecutionInfo/endTime, jobPreparationTaskExecutionInfo/exitCode, "
        "jobPreparationTaskExecutionInfo/result, jobPreparationTaskExecutionInfo/startTime, "
        "jobPreparationTaskExecutionInfo/state, jobReleaseTaskExecutionInfo/endTime, "
        "jobReleaseTaskExecutionInfo/exitCode, jobReleaseTaskExecutionInfo/result, "
        "jobReleaseTaskExecutionInfo/startTime, jobReleaseTaskExecutionInfo/state, nodeId, poolId (at position 0)",
    )


def test_select_names_properties_of_the_entity_and_expand_only_stats(batch_client, shared_pool, finished_job):
    client = batch_client
    _refused(
        lambda: list(client.list_tasks(finished_job, select=["id", "exitCode"])),
        "InvalidQueryParameterValue",
        INVALID_QUERY,
        [
            ("QueryParameterName", "$select"),
            ("QueryParameterValue", "id,exitCode"),
            (
                "Reason",
                "'exitCode' is not a property List Tasks returns; property names are case-sensitive: "
                "affinityInfo, applicationPackageReferences, commandLine, constraints, containerSettings, "
                "creationTime, dependsOn, displayName, eTag, environmentSettings, executionInfo, exitConditions, id, "
                "lastModified, multiInstanceSettings, nodeInfo, outputFiles, previousState, "
                "previousStateTransitionTime, requiredSlots, resourceFiles, state, stateTransitionTime, stats, url, "
                "userIdentity.",
            ),
        ],
    )
    with pytest.raises(HttpResponseError) as caught:
        client.get_job(finished_job, select=["id", "State"])
    assert caught.value.error.code == "InvalidQueryParameterValue"
    assert caught.value.model.error_values[2].value.startswith("'State' is not a property Get Job returns;")
    _refused(
        lambda: list(client.list_pools(expand=["nodes"])),
        "InvalidQueryParameterValue",
        INVALID_QUERY,
        [
            ("QueryParameterName", "$expand"),
            ("QueryParameterValue", "nodes"),
            (
                "Reason",
                "'nodes' is not something List Pools can expand (only stats); property names are "
                "case-sensitive: stats.",
            ),
        ],
    )
    assert client.get_pool(shared_pool, select=["id", "stats"], expand=["stats"]).id == shared_pool


def test_a_parameter_an_operation_does_not_take_is_unsupported(batch_client, finished_job):
    client = batch_client
    for path, parameter, name in (
        (f"/jobs/{finished_job}/tasks/good/subtasksinfo", "$filter", "List Subtasks"),
        ("/nodecounts", "$select", "List Pool Node Counts"),
        (f"/jobs/{finished_job}/taskcounts", "$filter", "this operation"),
    ):
        request = HttpRequest("GET", path, params={"api-version": "2025-06-01", parameter: "id eq 'x'"})
        with pytest.raises(HttpResponseError) as caught:
            client.send_request(request)
        body = caught.value.response.json()
        assert (caught.value.status_code, body["code"]) == (400, "UnsupportedQueryParameter")
        assert body["message"]["value"].startswith(f"{UNSUPPORTED}\nRequestId:")
        assert body["values"] == [
            {"key": "QueryParameterName", "value": parameter},
            {"key": "Reason", "value": f"{name} does not take {parameter}."},
        ]


def test_the_whole_error_body_of_a_refused_filter(batch_client):
    request = HttpRequest("GET", "/jobs", params={"api-version": "2025-06-01", "$filter": "state eq 'failed'"})
    with pytest.raises(HttpResponseError) as caught:
        batch_client.send_request(request)
    response = caught.value.response
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json; odata=minimalmetadata"
    body = response.json()
    assert list(body) == ["odata.metadata", "code", "message", "values"]
    assert body["odata.metadata"].endswith(
        "/$metadata#Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element"
    )
    assert body["code"] == "InvalidQueryParameterValue"
    assert body["message"]["lang"] == "en-US"
    assert body["message"]["value"].startswith(f"{INVALID_QUERY}\nRequestId:")
    assert [value["key"] for value in body["values"]] == ["QueryParameterName", "QueryParameterValue", "Reason"]

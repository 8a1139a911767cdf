"""Blob data named as OpenLineage's naming spec names it, and read back from the provider's asset URIs."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.hooks.dataset_names import DatasetName, blob_dataset, dataset_of_uri, url_dataset
from airflow_provider_azbatch.lineage.run_facts import RunIO, job_facts
from airflow_provider_azbatch.specs.blob_io import parse_inputs, parse_outputs


@pytest.mark.parametrize(
    ("account_url", "container", "path", "namespace", "name"),
    [
        # The spec's own example: wasbs://{container}@{service}.dfs.core.windows.net, {object key}.
        ("https://acct.blob.core.windows.net", "data", "train/", "wasbs://data@acct.dfs.core.windows.net", "train"),
        ("https://acct.blob.core.windows.net/", "data", None, "wasbs://data@acct.dfs.core.windows.net", "/"),
        ("https://acct.blob.core.windows.net", "m", "/a/b.bin", "wasbs://m@acct.dfs.core.windows.net", "a/b.bin"),
        # Another cloud keeps its domain.
        ("https://acct.blob.core.chinacloudapi.cn", "d", "x", "wasbs://d@acct.dfs.core.chinacloudapi.cn", "x"),
        # An emulator names its account in the path: host, port and account stay; plain HTTP is wasb.
        ("http://127.0.0.1:10000/devstoreaccount1", "d", "in/", "wasb://d@127.0.0.1:10000/devstoreaccount1", "in"),
        ("http://localhost:10000/devstoreaccount1", "d", "", "wasb://d@localhost:10000/devstoreaccount1", "/"),
        # A custom domain is kept as it is.
        ("https://files.example.org", "d", "p", "wasbs://d@files.example.org", "p"),
    ],
)
def test_blob_data_is_named_by_the_openlineage_spec(account_url, container, path, namespace, name):
    dataset = blob_dataset(account_url, container, path)
    assert (dataset.namespace, dataset.name) == (namespace, name)
    # The asset URI holds the same parts (the container in its path: Airflow 3.0 drops a URI's user part).
    assert "@" not in dataset.asset_uri
    assert dataset_of_uri(dataset.asset_uri) == dataset


def test_urls_are_named_without_their_query_and_blob_urls_as_blobs():
    assert url_dataset("https://example.org/files/vocab.txt?sig=secret#x") == DatasetName(
        "https://example.org", "files/vocab.txt"
    )
    blob = url_dataset("https://acct.blob.core.windows.net/models/v1/m.bin?sv=1&sig=s")
    assert (blob.namespace, blob.name) == ("wasbs://models@acct.dfs.core.windows.net", "v1/m.bin")
    assert blob.asset_uri == "wasbs://acct.dfs.core.windows.net/models/v1/m.bin"
    # A blob of the connection's own emulator account.
    storage = "http://127.0.0.1:10000/devstoreaccount1"
    own = url_dataset("http://127.0.0.1:10000/devstoreaccount1/in/a.txt?sig=s", storage)
    assert (own.namespace, own.name) == ("wasb://in@127.0.0.1:10000/devstoreaccount1", "a.txt")
    assert own.asset_uri == "wasb://127.0.0.1:10000/devstoreaccount1/in/a.txt"


@pytest.mark.parametrize(
    "uri",
    ["s3://bucket/key", "wasbs://acct.dfs.core.windows.net", "wasbs://c@acct.dfs.core.windows.net/p"],
)
def test_an_asset_uri_not_of_this_form_is_refused_with_the_form(uri):
    with pytest.raises(
        ValueError, match=r"is not an Azure Blob asset URI: wasbs://<account>\.dfs\.core\.windows\.net/"
    ):
        dataset_of_uri(uri)
    with pytest.raises(ValueError, match="names no container after its account"):
        dataset_of_uri("wasb://127.0.0.1:10000/devstoreaccount1")


def test_airflow_normalizes_the_providers_asset_uris_with_its_handler():
    from airflow.sdk import Asset

    asset = Asset(uri="wasbs://acct.dfs.core.windows.net/models/runs/")
    assert asset.uri == "wasbs://acct.dfs.core.windows.net/models/runs"
    with pytest.raises(ValueError, match="is not an Azure Blob asset URI"):
        Asset(uri="wasbs://acct.dfs.core.windows.net")


def test_a_runs_inputs_and_outputs_as_datasets():
    storage = "https://acct.blob.core.windows.net"

    class Task:
        def __init__(self, task_id, outputs=(), result_file=None):
            self.id, self.inputs, self.outputs, self.result_file = task_id, (), outputs, result_file

    io = RunIO.of(
        parse_inputs([{"container": "datasets", "prefix": "train/"}, {"url": "https://x.org/v.txt", "path": "v"}], "i"),
        parse_outputs([{"pattern": "model/**", "path": "runs/7"}], "o"),
        [Task("main", parse_outputs([{"pattern": "m.json", "container": "metrics"}], "t"))],
        output_container="models",
        upload_logs=None,
        logs_prefix="azbatch-logs",
        result_file="result.json",
    )
    assert [(d.namespace, d.name) for d in io.input_datasets(storage, [("ws", "w/workspace-1.tar.gz")])] == [
        ("wasbs://datasets@acct.dfs.core.windows.net", "train"),
        ("https://x.org", "v.txt"),
        ("wasbs://ws@acct.dfs.core.windows.net", "w/workspace-1.tar.gz"),
    ]
    assert [(d.namespace, d.name) for d in io.output_datasets(storage, "job-1")] == [
        ("wasbs://models@acct.dfs.core.windows.net", "runs/7"),
        ("wasbs://metrics@acct.dfs.core.windows.net", "m.json"),
        ("wasbs://models@acct.dfs.core.windows.net", "azbatch-logs/job-1"),
        ("wasbs://models@acct.dfs.core.windows.net", "azbatch-logs/job-1/main/result/result.json"),
    ]
    # Without a storage account, only inputs by URL have names.
    assert [d.name for d in io.input_datasets(None)] == ["v.txt"]
    assert io.output_datasets(None, "job-1") == []


def test_the_run_facet_of_an_ended_job():
    from airflow_provider_azbatch.runs import RunResult

    result = RunResult(
        "job-1",
        {
            "pool_id": "gpu",
            "job_state": "completed",
            "terminate_reason": "AllTasksComplete",
            "task_counts": {"active": 0, "running": 0, "completed": 2, "succeeded": 1, "failed": 1},
            "tasks": {"a": {"exit_code": 0}, "b": {"exit_code": 3}},
            "cost": {
                "estimate_usd": 0.0123,
                "basis": "node time",
                "vm_size": "standard_nc6",
                "region": "westeurope",
                "prices_date": "2026-09-01",
            },
        },
        total=2,
        nodes=2,
    )
    facts = job_facts(
        account="acct", account_url="https://acct.westeurope.batch.azure.com", job_id=None, pool_id=None, result=result
    )
    assert facts == {
        "account": "acct",
        "accountUrl": "https://acct.westeurope.batch.azure.com",
        "jobId": "job-1",
        "poolId": "gpu",
        "vmSize": "standard_nc6",
        "nodeCount": 2,
        "costEstimate": {"usd": 0.0123, "basis": "node time", "region": "westeurope", "pricesDate": "2026-09-01"},
        "jobState": "completed",
        "terminateReason": "AllTasksComplete",
        "taskCount": 2,
        "taskCounts": {"active": 0, "running": 0, "completed": 2, "succeeded": 1, "failed": 1},
        "exitCodes": {"a": 0, "b": 3},
    }

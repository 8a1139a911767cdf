"""Service principal authentication end to end: azure-identity's real ClientSecretCredential gets a token
from the local service's authority (--tls) and the operator runs a job with it."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import run_dag
from tests.helpers import pool_options, wait_until


@pytest.fixture(scope="module")
def tls_batch():
    with run_local_batch_service(tls=True) as service:
        client = BatchClient(
            service.url,
            AzureNamedKeyCredential(service.account_name, service.account_key),
            connection_verify=service.ca_file,
        )
        client.create_pool(pool_options("sp-pool", nodes=1, slots=2))
        wait_until(lambda: [n.state for n in client.list_nodes("sp-pool")] == [m.BatchNodeState.IDLE], what="node")
        yield service


def _sp_connection(service) -> str:
    return json.dumps(
        {
            "conn_type": "azbatch",
            "login": service.account_name,
            "extra": {
                "account_url": service.url,
                "auth_method": "service_principal",
                "tenant_id": service.tenant_id,
                "client_id": service.client_id,
                "client_secret": service.client_secret,
                "cloud": "custom",
                "authority_host": service.url,
                "token_scope": "https://batch.core.windows.net//.default",
                "ca_bundle": service.ca_file,
            },
        }
    )


def test_service_principal_connection_test(tls_batch, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_SP", _sp_connection(tls_batch))
    assert AzureBatchHook("azbatch_sp").test_connection() == (
        True,
        f"Connected to Batch account 'devbatchaccount1' at {tls_batch.url} (service_principal)",
    )


def test_service_principal_runs_a_job_end_to_end(airflow_db, tls_batch, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_SP", _sp_connection(tls_batch))
    with DAG("sp_end_to_end", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        AzureBatchJobOperator(
            task_id="hello",
            pool_id="sp-pool",
            command="echo hello from a token-authenticated job",
            azbatch_conn_id="azbatch_sp",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert "[main] hello from a token-authenticated job" in logs
    # The connection has no account key: every Batch request above carried the principal's token.
    assert not any(tls_batch.client_secret in line for line in logs)

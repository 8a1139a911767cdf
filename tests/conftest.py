"""Test session setup: a throwaway AIRFLOW_HOME set before anything imports Airflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_HOME = Path(tempfile.mkdtemp(prefix="azbatch-test-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(Path(__file__).parent / "dags")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO")

import pytest  # noqa: E402
from azure.core.credentials import AzureNamedKeyCredential  # noqa: E402


@pytest.fixture(scope="session")
def batch_client(local_batch_service):
    from azure.batch import BatchClient

    client = BatchClient(
        local_batch_service.url,
        AzureNamedKeyCredential(local_batch_service.account_name, local_batch_service.account_key),
    )
    yield client
    client.close()

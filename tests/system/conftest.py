"""System tests: the ``example_*.py`` files here are runnable DAGs (AIP-47), collected as test modules too
(``python_files`` in pyproject.toml).

Each runs twice: against the local Batch service (with Azurite as its storage account), always; and against a real
Batch account when ``AZBATCH_SYSTEM_TEST_CONN`` holds that account's ``azbatch`` connection (the JSON or URI of an
``AIRFLOW_CONN_*`` variable, with a storage account), skipped otherwise with the reason.
"""

from __future__ import annotations

import os

import pytest

CONN_VARIABLE = "AZBATCH_SYSTEM_TEST_CONN"
TARGETS = ("local", "azure")


def use_target(target: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point ``azbatch_default`` at the target's account: the local service, or the one the variable names."""
    if target == "azure":
        connection = os.environ.get(CONN_VARIABLE)
        if not connection:
            pytest.skip(
                f"{CONN_VARIABLE} is not set: this DAG ran against the local Batch service only; set it to an azbatch "
                "connection (JSON or URI) to run it on a real Batch account (docs/howto/system-tests.md)"
            )
        monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_DEFAULT", connection)
        # The production default: the session's 2 s is for the local service's instant pools.
        monkeypatch.setenv("AIRFLOW__AZBATCH__POOL_CHECK_INTERVAL", "30")
        return
    from tests.airflow_helpers import azbatch_connection_json

    service, azurite = request.getfixturevalue("local_batch_service"), request.getfixturevalue("azurite")
    monkeypatch.setenv(
        "AIRFLOW_CONN_AZBATCH_DEFAULT",
        azbatch_connection_json(service, storage_account_url=azurite.url, storage_account_key=azurite.key),
    )


@pytest.fixture(params=TARGETS)
def system_target(request, monkeypatch, airflow_db):  # type: ignore[no-untyped-def]
    """``azbatch_default`` pointing at the target account for one run of a system-test DAG."""
    use_target(request.param, request, monkeypatch)
    return request.param

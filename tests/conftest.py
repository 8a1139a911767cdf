"""Test session setup: a throwaway AIRFLOW_HOME set before anything imports Airflow."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# A throwaway AIRFLOW_HOME inside the checkout (git-ignored), one per session so that sessions
# running side by side do not share a database; removed when the session ends.
_ROOT = Path(__file__).resolve().parent.parent / ".test-home"
_ROOT.mkdir(exist_ok=True)
_HOME = Path(tempfile.mkdtemp(prefix="session-", dir=_ROOT))
atexit.register(shutil.rmtree, _HOME, True)
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(Path(__file__).parent / "dags")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO")
# Notice a pool that cannot get nodes within seconds, not the production half minute.
os.environ["AIRFLOW__AZBATCH__POOL_CHECK_INTERVAL"] = "2"
# dag.test() runs triggers in-process with no executor whose stale events a quick trigger could race
# (triggers/watch_events.py, hold_for_the_scheduler): no hold there. The deployments in tests/airflow_run keep it.
os.environ["AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS"] = "0"

import pytest  # noqa: E402
from azure.core.credentials import AzureNamedKeyCredential  # noqa: E402

# The local Batch service (its own package) and its session-scoped ``local_batch_service`` fixture.
pytest_plugins = ["local_azure_batch.pytest_plugin"]


@pytest.fixture(scope="session")
def batch_client(local_batch_service):
    from azure.batch import BatchClient

    client = BatchClient(
        local_batch_service.url,
        AzureNamedKeyCredential(local_batch_service.account_name, local_batch_service.account_key),
    )
    yield client
    client.close()


@pytest.fixture(scope="session")
def airflow_db():
    """The Airflow metadata DB (SQLite in the throwaway AIRFLOW_HOME), for tests that run DAGs."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture
def azbatch_default(local_batch_service, monkeypatch):
    """``azbatch_default`` pointing at the session's local Batch service (shared key)."""
    from tests.airflow_helpers import azbatch_connection_json

    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_DEFAULT", azbatch_connection_json(local_batch_service))
    return local_batch_service


@pytest.fixture(scope="session")
def shared_pool(batch_client):
    """A 2-node x 4-slot pool on the session's local Batch service, ready to run tasks."""
    from azure.batch import models as m

    from tests.helpers import pool_options, wait_until

    batch_client.create_pool(pool_options("shared", nodes=2, slots=4))
    wait_until(
        lambda: sum(1 for n in batch_client.list_nodes("shared") if n.state == m.BatchNodeState.IDLE) == 2,
        what="shared pool nodes",
    )
    return "shared"


@pytest.fixture(scope="session")
def azurite():
    """Azurite's blob service on a free loopback port, for the session."""
    from tests.azurite import run_azurite

    with run_azurite() as service:
        yield service


@pytest.fixture
def azbatch_with_storage(local_batch_service, azurite, monkeypatch):
    """``azbatch_default`` with the session's Azurite as its storage account."""
    from tests.airflow_helpers import azbatch_connection_json

    monkeypatch.setenv(
        "AIRFLOW_CONN_AZBATCH_DEFAULT",
        azbatch_connection_json(local_batch_service, storage_account_url=azurite.url, storage_account_key=azurite.key),
    )
    return local_batch_service


# `make test` runs the suite in two parts (docs/development.md, "The test suite's parts"): every test not marked
# `serial` in several processes (pytest-xdist), then the `serial` ones alone. Serial: every test of a directory
# below (a real Airflow deployment), every test marked `airflow_run`, and each test marked `serial` by hand (one
# that bounds how long something takes).
SERIAL_DIRECTORIES = ("airflow_run",)
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:  # type: ignore[no-untyped-def]
    for item in items:
        directory = Path(item.path).resolve().relative_to(_TESTS).parts[0]
        if directory in SERIAL_DIRECTORIES:
            item.add_marker(pytest.mark.airflow_run)
        if item.get_closest_marker("airflow_run") is not None:
            item.add_marker(pytest.mark.serial)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    """In a pytest-xdist worker, what a test measured travels with its report to the process that prints."""
    from tests.measured import MEASURED

    outcome = yield
    if os.environ.get("PYTEST_XDIST_WORKER") and MEASURED:
        outcome.get_result().user_properties.extend(("measured", line) for line in MEASURED)
        MEASURED.clear()


def pytest_runtest_logreport(report) -> None:  # type: ignore[no-untyped-def]
    from tests.measured import MEASURED

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        MEASURED.extend(value for name, value in report.user_properties if name == "measured")


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """What tests measured (``tests.measured.report``), where a run without ``-s`` shows it."""
    from tests.measured import MEASURED

    if MEASURED:
        terminalreporter.section("measured")
        for line in MEASURED:
            terminalreporter.line(line)

"""Fixtures of the local Batch service's own tests: the service, an SDK client, a ready pool."""

from __future__ import annotations

import pytest
from azure.core.credentials import AzureNamedKeyCredential

pytest_plugins = ["local_azure_batch.pytest_plugin"]

# Files whose tests wait on the service's own clock (minutes of wall time, next to no CPU): collected first, so
# that pytest-xdist starts them first and the other files run beside them rather than after.
WAITS_ON_THE_CLOCK = ("test_job_schedules_real_time.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in WAITS_ON_THE_CLOCK)


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
def shared_pool(batch_client):
    """A 2-node x 4-slot pool on the session's local Batch service, ready to run tasks."""
    from azure.batch import models as m

    from tests import sdk_models
    from tests.helpers import wait_until

    batch_client.create_pool(sdk_models.pool("shared", nodes=2, slots=4))
    wait_until(
        lambda: sum(1 for n in batch_client.list_nodes("shared") if n.state == m.BatchNodeState.IDLE) == 2,
        what="shared pool nodes",
    )
    return "shared"

"""Opt-in pytest plugin: a session-scoped ``local_batch_service`` fixture.

Enable it in a ``conftest.py`` with ``pytest_plugins = ["local_azure_batch.pytest_plugin"]`` (or run
pytest with ``-p local_azure_batch.pytest_plugin``). Installing the package registers nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_azure_batch.testing import LocalBatchService, run_local_batch_service


@pytest.fixture(scope="session")
def local_batch_service() -> Iterator[LocalBatchService]:
    """A local Batch service (shared key, http) for the whole test session."""
    with run_local_batch_service() as service:
        yield service

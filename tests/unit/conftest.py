"""Helpers for the unit tests: connections built the way Airflow hands them to the hook."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from airflow.sdk import Connection

from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings

ACCOUNT_URL = "https://myaccount.westeurope.batch.azure.com"
ACCOUNT_KEY = base64.b64encode(b"not-a-real-batch-account-key").decode()


def make_connection(
    extra: dict[str, Any] | None = None,
    *,
    conn_id: str = "azbatch_test",
    login: str | None = None,
    password: str | None = None,
    host: str | None = None,
) -> Connection:
    return Connection(
        conn_id=conn_id,
        conn_type="azbatch",
        host=host,
        login=login,
        password=password,
        extra=json.dumps(extra) if extra is not None else None,
    )


def make_settings(extra: dict[str, Any] | None = None, **kwargs: Any) -> BatchConnectionSettings:
    return BatchConnectionSettings.from_connection(make_connection(extra, **kwargs))


@pytest.fixture
def clean_azure_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No AZURE_*/managed identity variables (azure-identity picks its credentials from these), no proxy."""
    for name in list(os.environ):
        if name.startswith(("AZURE_", "IDENTITY_", "MSI_", "IMDS_")) or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    return monkeypatch

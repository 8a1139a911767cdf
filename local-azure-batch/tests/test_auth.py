"""A wrong key, a tampered body and an old ocp-date are each rejected with 403 AuthenticationFailed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError

WRONG_KEY = "QkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkE="


def _assert_auth_failed(info, detail):
    assert info.value.status_code == 403
    assert info.value.error.code == "AuthenticationFailed"
    assert info.value.model.message.value.startswith("Server failed to authenticate the request.")
    assert {item.key: item.value for item in info.value.model.error_values}["AuthenticationErrorDetail"] == detail


def test_wrong_key_is_rejected(local_batch_service):
    client = BatchClient(local_batch_service.url, AzureNamedKeyCredential(local_batch_service.account_name, WRONG_KEY))
    with pytest.raises(HttpResponseError) as info:
        list(client.list_jobs())
    _assert_auth_failed(info, "The MAC signature found in the HTTP request is not the same as any computed signature.")


def test_tampered_body_is_rejected(batch_client):
    def tamper(pipeline_request):
        request = pipeline_request.http_request
        body = json.loads(request.data if isinstance(request.data, (str, bytes)) else json.dumps(request.data))
        body["poolInfo"] = {"poolId": "someone-elses-pool"}
        request.set_bytes_body(json.dumps(body).encode())

    with pytest.raises(HttpResponseError) as info:
        batch_client.create_job(
            m.BatchJobCreateOptions(id="tampered", pool_info=m.BatchPoolInfo(pool_id="p")),
            raw_request_hook=tamper,
        )
    _assert_auth_failed(info, "The MAC signature found in the HTTP request is not the same as any computed signature.")


def test_old_ocp_date_is_rejected(batch_client):
    old = datetime.now(timezone.utc) - timedelta(minutes=20)
    with pytest.raises(HttpResponseError) as info:
        batch_client.get_job("anything", ocp_date=old)
    sent = old.strftime("%a, %d %b %Y %H:%M:%S GMT")
    _assert_auth_failed(info, f"Request date header too old: '{sent}'")


def test_missing_authorization_is_401(local_batch_service):
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{local_batch_service.url}/jobs?api-version=2025-06-01", timeout=10)
    assert info.value.code == 401
    body = json.loads(info.value.read())
    assert body["code"] == "AuthenticationFailed"

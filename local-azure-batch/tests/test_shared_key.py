"""Shared Key verification against the captured test vectors of azure-batch 15.1.0."""

from datetime import datetime, timezone

import pytest

from local_azure_batch.auth.shared_key import sign, string_to_sign, verify_shared_key
from local_azure_batch.model.errors import BatchServiceError

KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
DATE = "Thu, 01 Jan 2026 00:00:00 GMT"
NOW = datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "signature"),
    [
        (
            "GET",
            "/jobs/job-1",
            "api-version=2025-06-01",
            {"ocp-date": DATE},
            "ISXGQ3fqyZHr4Wv95BE+PJbqUDFnQiG6Wqy8ShqMYqM=",
        ),
        (
            "GET",
            "/jobs/job-1/tasks",
            "api-version=2025-06-01&timeOut=30&maxresults=1&$filter=state%20eq%20%27completed%27&$select=id,state",
            {"ocp-date": DATE},
            "d6hDcMkAlWsN8Z8PPq8t4mBrvG2o8ey7jNVidcWku10=",
        ),
        (
            "POST",
            "/jobs",
            "api-version=2025-06-01",
            {
                "ocp-date": DATE,
                "Content-Length": "45",
                "Content-Type": "application/json; odata=minimalmetadata",
            },
            "T3hQfNnznnhmD7RvZvAEu7HHffJntHZHcExnJyiGQxI=",
        ),
    ],
)
def test_captured_vectors_verify(method, path, query, headers, signature):
    assert sign(KEY, string_to_sign(method, path, query, headers, "testacct")) == signature
    verify_shared_key(f"SharedKey testacct:{signature}", method, path, query, headers, "testacct", KEY, now=NOW)


def test_string_to_sign_matches_the_captured_form():
    text = string_to_sign("GET", "/jobs/job-1", "api-version=2025-06-01", {"ocp-date": DATE}, "testacct")
    expected = "GET\n" + "\n" * 11 + f"ocp-date:{DATE}\n/testacct/jobs/job-1\napi-version:2025-06-01"
    assert text == expected


def test_documented_lowercase_query_names_are_accepted():
    query = "api-version=2025-06-01&timeOut=30"
    headers = {"ocp-date": DATE}
    lowered = sign(KEY, string_to_sign("GET", "/jobs", query, headers, "testacct", lowercase_query_names=True))
    verify_shared_key(f"SharedKey testacct:{lowered}", "GET", "/jobs", query, headers, "testacct", KEY, now=NOW)


def _failure(**overrides):
    args = {
        "authorization": "SharedKey testacct:ISXGQ3fqyZHr4Wv95BE+PJbqUDFnQiG6Wqy8ShqMYqM=",
        "method": "GET",
        "raw_path": "/jobs/job-1",
        "raw_query": "api-version=2025-06-01",
        "headers": {"ocp-date": DATE},
        "account_name": "testacct",
        "account_key": KEY,
        "now": NOW,
    }
    args.update(overrides)
    with pytest.raises(BatchServiceError) as info:
        verify_shared_key(**args)
    assert info.value.status == 403
    assert info.value.code == "AuthenticationFailed"
    return dict(info.value.values)["AuthenticationErrorDetail"]


def test_wrong_key_is_rejected():
    detail = _failure(account_key="QkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkE=")
    assert detail == "The MAC signature found in the HTTP request is not the same as any computed signature."


def test_changed_path_is_rejected():
    assert "MAC signature" in _failure(raw_path="/jobs/job-2")


def test_stale_date_is_rejected():
    late = datetime(2026, 1, 1, 0, 16, tzinfo=timezone.utc)
    assert _failure(now=late) == f"Request date header too old: '{DATE}'"


def test_unknown_account_and_scheme_are_rejected():
    assert "account name 'other'" in _failure(authorization="SharedKey other:abc")
    assert "not of the form" in _failure(authorization="Basic abc")


def test_missing_date_is_rejected():
    assert _failure(headers={}) == "The request has neither an ocp-date nor a Date header."

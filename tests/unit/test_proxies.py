"""The proxy of a client is read from the environment once, as azure-core would read it."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.hooks.proxies import proxy_kwargs

URL = "https://acct.westeurope.batch.azure.com"


pytestmark = pytest.mark.usefixtures("clean_azure_env")


def test_without_proxy_variables_the_client_goes_direct() -> None:
    assert proxy_kwargs(URL) == {"use_env_settings": False}


def test_the_scheme_s_proxy_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://other.corp:80")
    assert proxy_kwargs(URL) == {"use_env_settings": False, "proxies": {"https": "http://proxy.corp:3128"}}
    assert proxy_kwargs("http://127.0.0.1:8089")["proxies"] == {"http": "http://other.corp:80"}


def test_all_proxy_applies_to_any_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "http://proxy.corp:3128")
    assert proxy_kwargs(URL)["proxies"] == {"https": "http://proxy.corp:3128"}


@pytest.mark.parametrize("no_proxy", ["localhost,.batch.azure.com", "localhost,acct.westeurope.batch.azure.com", "*"])
def test_no_proxy_hosts_go_direct(monkeypatch: pytest.MonkeyPatch, no_proxy: str) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert proxy_kwargs(URL) == {"use_env_settings": False}


def test_other_hosts_in_no_proxy_do_not_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.corp:3128")
    monkeypatch.setenv("no_proxy", "localhost,.blob.core.windows.net")
    assert proxy_kwargs(URL)["proxies"] == {"https": "http://proxy.corp:3128"}

"""--tls: HTTPS with a generated CA, and Entra-style tokens from the built-in authority."""

from __future__ import annotations

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import ClientSecretCredential

from local_azure_batch.testing import run_local_batch_service

SCOPE = "https://batch.core.windows.net//.default"


@pytest.fixture(scope="module")
def tls_service():
    with run_local_batch_service(tls=True) as service:
        yield service


def _credential(service, secret):
    return ClientSecretCredential(
        service.tenant_id,
        service.client_id,
        secret,
        authority=service.url,
        disable_instance_discovery=True,
        connection_verify=service.ca_file,
    )


def test_service_principal_token_is_accepted(tls_service):
    assert tls_service.url.startswith("https://")
    credential = _credential(tls_service, tls_service.client_secret)
    client = BatchClient(tls_service.url, credential, connection_verify=tls_service.ca_file)
    client.create_job(m.BatchJobCreateOptions(id="tls-job", pool_info=m.BatchPoolInfo(pool_id="p")))
    assert [job.id for job in client.list_jobs()] == ["tls-job"]


def test_wrong_client_secret_is_refused_by_the_authority(tls_service):
    credential = _credential(tls_service, "not-the-secret")
    with pytest.raises(ClientAuthenticationError, match="AADSTS7000215: Invalid client secret"):
        credential.get_token(SCOPE)


class _ForgedCredential:
    def get_token(self, *scopes, **kwargs):
        forged = "eyJhbGciOiJIUzI1NiJ9.eyJhdWQiOiJodHRwczovL2JhdGNoLmNvcmUud2luZG93cy5uZXQvIn0.c2lnbmF0dXJl"
        return AccessToken(forged, 2_000_000_000)


def test_token_not_issued_by_the_authority_is_401(tls_service):
    client = BatchClient(tls_service.url, _ForgedCredential(), connection_verify=tls_service.ca_file)
    with pytest.raises(ClientAuthenticationError) as info:
        list(client.list_jobs())
    assert info.value.status_code == 401
    assert info.value.error.code == "AuthenticationFailed"


def test_shared_key_still_works_over_tls(tls_service):
    from azure.core.credentials import AzureNamedKeyCredential

    client = BatchClient(
        tls_service.url,
        AzureNamedKeyCredential(tls_service.account_name, tls_service.account_key),
        connection_verify=tls_service.ca_file,
    )
    assert isinstance(list(client.list_pools()), list)

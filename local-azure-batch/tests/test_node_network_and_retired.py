"""Retired certificates, nodes' network keys (endpoints, IPv6) and a service-log upload that cannot reach its
container, through the unmodified SDK (or its pipeline, for the certificate paths it no longer has methods for)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch._patch import BatchSharedKeyAuthPolicy
from azure.core import PipelineClient
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.rest import HttpRequest
from azure.storage.blob import ContainerClient

from local_azure_batch.testing import LocalBatchService
from tests import sdk_models
from tests.azurite import run_azurite, writable_container
from tests.helpers import wait_until

RETIRED_REASON = (
    "The operation is blocked because the 'Azure Batch Certificates' feature was retired on 02/29/2024. For "
    "Certificate APIs, they are no longer supported. For Pool, Job, and Job Schedule APIs, the target resource "
    "should no longer contain certificate references, please either remove the certificate references or delete "
    "the resource."
)
CERTIFICATE = "/certificates(thumbprintAlgorithm=sha1,thumbprint=cff2ab63c8c955aaf71989efa641b906558d9fb7)"


def _send(service: LocalBatchService, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    client = PipelineClient(
        base_url=service.url,
        policies=[BatchSharedKeyAuthPolicy(AzureNamedKeyCredential(service.account_name, service.account_key))],
    )
    request = HttpRequest(method, f"{service.url}{path}?api-version=2025-06-01")
    if body is not None:
        request.set_bytes_body(json.dumps(body).encode())
        request.headers["Content-Type"] = "application/json; odata=minimalmetadata"
    response = client.send_request(request)
    response.read()
    return response.status_code, json.loads(response.text())


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/certificates"),
        ("GET", "/certificates"),
        ("GET", CERTIFICATE),
        ("DELETE", CERTIFICATE),
        ("POST", CERTIFICATE + "/canceldelete"),
    ],
)
def test_every_certificate_operation_is_retired(local_batch_service: LocalBatchService, method: str, path: str):
    body = {"thumbprint": "cff2", "thumbprintAlgorithm": "sha1", "data": "MIIG"} if method == "POST" else None
    status, error = _send(local_batch_service, method, path, body)
    assert status == 400
    assert error["code"] == "CertificateRetired"
    assert error["message"]["value"].startswith("The 'Azure Batch Certificates' feature was retired on 02/29/2024.\n")
    assert error["values"] == [{"key": "Reason", "value": RETIRED_REASON}]


def _idle_node(batch_client: BatchClient, pool_id: str) -> m.BatchNode:
    return wait_until(
        lambda: next((node for node in batch_client.list_nodes(pool_id) if node.state == "idle"), None),
        what="an idle node",
    )


def test_nodes_report_their_endpoints_and_ipv6_where_the_pool_asks(batch_client: BatchClient) -> None:
    spec = sdk_models.pool("dual-stack", nodes=1)
    spec.network_configuration = m.NetworkConfiguration(
        public_ip_address_configuration=m.BatchPublicIpAddressConfiguration(ip_families=["IPv4", "IPv6"]),
        endpoint_configuration=m.BatchPoolEndpointConfiguration(
            inbound_nat_pools=[
                m.BatchInboundNatPool(
                    name="sshpool",
                    protocol="tcp",
                    backend_port=22,
                    frontend_port_range_start=40000,
                    frontend_port_range_end=40500,
                )
            ]
        ),
    )
    batch_client.create_pool(spec)
    node = _idle_node(batch_client, "dual-stack")
    assert node.ipv6_address == "::1"
    endpoints = {
        (item.name, item.public_ip_address, item.frontend_port, item.backend_port)
        for item in node.endpoint_configuration.inbound_endpoints
    }
    assert endpoints == {("sshpool.0", node.ip_address, 40000, 22), ("sshpool-ipv6.0", "::1", 40000, 22)}
    login = batch_client.get_node_remote_login_settings("dual-stack", node.id)
    assert (login.remote_login_ip_address, login.remote_login_port) == (node.ip_address, 22)
    assert (login.ipv6_remote_login_ip_address, login.ipv6_remote_login_port) == ("::1", 22)

    # A pool that does not ask for IPv6 has none, and the service's own SSH rule as its endpoint.
    batch_client.create_pool(sdk_models.pool("single-stack", nodes=1))
    plain = _idle_node(batch_client, "single-stack")
    assert plain.ipv6_address is None
    (rule,) = plain.endpoint_configuration.inbound_endpoints
    assert (rule.name, rule.protocol, rule.frontend_port, rule.backend_port) == ("SSHRule.0", "tcp", 50000, 22)
    assert batch_client.get_node_remote_login_settings("single-stack", plain.id).ipv6_remote_login_ip_address is None


@pytest.fixture(scope="module")
def container() -> Iterator[tuple[ContainerClient, str]]:
    with run_azurite() as endpoint, writable_container(endpoint, "logs") as made:
        yield made


def test_an_unreachable_container_is_answered_and_the_node_logs_the_failure(
    batch_client: BatchClient, container: tuple[ContainerClient, str]
) -> None:
    blobs, url = container
    batch_client.create_pool(sdk_models.pool("log-uploads", nodes=1))
    node = _idle_node(batch_client, "log-uploads")
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    # A container the node cannot write to (its SAS is not the account's: 403, not retried): the service's
    # answer comes first, the node's failure after.
    unreachable = f"{url.split('?')[0].rsplit('/', 1)[0]}/nowhere?sv=2025-01-05&sr=c&sp=w&sig=bm90LWEtc2ln"
    answered = batch_client.upload_node_logs(
        "log-uploads", node.id, m.UploadBatchServiceLogsOptions(container_url=unreachable, start_time=since)
    )
    assert answered.number_of_files_uploaded >= 1
    assert answered.virtual_directory_name.split("/")[1:3] == ["log-uploads", node.id]

    def agent_log() -> str | None:
        result = batch_client.upload_node_logs(
            "log-uploads", node.id, m.UploadBatchServiceLogsOptions(container_url=url, start_time=since)
        )
        name = f"{result.virtual_directory_name}/agent.log"
        text = (
            wait_until(
                lambda: name in {blob.name for blob in blobs.list_blobs(name_starts_with=name)}, what="the agent log"
            )
            and blobs.download_blob(name).readall().decode()
        )
        return text if f"uploading service logs to {answered.virtual_directory_name} failed" in text else None

    text = wait_until(agent_log, timeout=30, interval=1, what="the failure in the node's agent log")
    (line,) = [line for line in text.splitlines() if answered.virtual_directory_name in line and "failed" in line]
    directory = answered.virtual_directory_name
    assert line.endswith(
        f" ERROR uploading service logs to {directory} failed: Uploading {directory}/agent.log failed: Server failed "
        "to authenticate the request. Make sure the value of the Authorization header is formed correctly including "
        "the signature."
    ), line

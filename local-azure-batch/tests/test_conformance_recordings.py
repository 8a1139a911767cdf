"""Replays the requests of real recorded Batch sessions and compares what the local service answers.

For every request the recordings hold (tests/fixtures/batch-service/recordings, copied unedited from
Azure/azure-sdk-assets), the local service must answer with the recorded status code, send the
recorded headers the SDK relies on, and return a body with every recorded key, each with the same
JSON type. Runs of identical GETs in a recording are polls: they are replayed until the entity
reaches the recorded state.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from azure.batch._patch import BatchSharedKeyAuthPolicy
from azure.core import PipelineClient
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.rest import HttpRequest

from local_azure_batch.testing import run_local_batch_service

RECORDINGS = Path(__file__).parent / "fixtures" / "batch-service" / "recordings"
# Headers the SDK reads (see the notes' table); transport details like Date or Server are not compared.
CHECKED_HEADERS = {
    "content-type",
    "etag",
    "last-modified",
    "dataserviceid",
    "dataserviceversion",
    "request-id",
    "location",
    "ocp-creation-time",
    "ocp-batch-file-isdirectory",
    "ocp-batch-file-url",
    "content-length",
}
# Keys that only exist on real infrastructure (none left: nodes report their endpoints too).
NOT_EMULATED: set[str] = set()

# Entities the recorded tests created before recording started (their preparers are not recorded).
SETUP: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "files.json": [
        (
            "POST",
            "/pools",
            {
                "id": "d5e1b9f",
                "vmSize": "standard_d2_v2",
                "targetDedicatedNodes": 1,
                "virtualMachineConfiguration": {
                    "imageReference": {
                        "publisher": "MicrosoftWindowsServer",
                        "offer": "WindowsServer",
                        "sku": "2016-Datacenter-smalldisk",
                    },
                    "nodeAgentSKUId": "batch.node.windows amd64",
                },
            },
        ),
        ("POST", "/jobs", {"id": "batch", "poolInfo": {"poolId": "d5e1b9f"}}),
    ],
    "scale_pools.json": [
        (
            "POST",
            "/pools",
            {
                "id": "7349199b",
                "displayName": "test_pool",
                "vmSize": "standard_d2_v2",
                "virtualMachineConfiguration": {
                    "imageReference": {
                        "publisher": "Canonical",
                        "offer": "0001-com-ubuntu-server-jammy",
                        "sku": "22_04-lts",
                    },
                    "nodeAgentSKUId": "batch.node.ubuntu 22.04",
                },
                "userAccounts": [{"name": "task-user", "password": "not-returned", "elevationLevel": "admin"}],
                "networkConfiguration": {
                    "endpointConfiguration": {
                        "inboundNATPools": [
                            {
                                "name": "ruleName",
                                "protocol": "tcp",
                                "backendPort": 3389,
                                "frontendPortRangeStart": 15000,
                                "frontendPortRangeEnd": 15100,
                            }
                        ]
                    }
                },
            },
        ),
    ],
}


SETUP["excerpts/upload_node_logs.json"] = [
    (
        "POST",
        "/pools",
        {
            "id": "poolId",
            "vmSize": "standard_d2_v2",
            "targetDedicatedNodes": 1,
            "virtualMachineConfiguration": {
                "imageReference": {
                    "publisher": "Canonical",
                    "offer": "0001-com-ubuntu-server-jammy",
                    "sku": "22_04-lts",
                },
                "nodeAgentSKUId": "batch.node.ubuntu 22.04",
            },
        },
    ),
]


class Replayer:
    def __init__(self, service) -> None:
        self.base = service.url
        self.client = PipelineClient(
            base_url=service.url,
            policies=[BatchSharedKeyAuthPolicy(AzureNamedKeyCredential(service.account_name, service.account_key))],
        )
        self.next_link: str | None = None
        # Server-assigned ids (compute nodes) differ from the recording's: recorded id -> ours.
        self.ids: dict[str, str] = {}

    def learn_ids(self, recorded: Any, ours: Any) -> None:
        if not (isinstance(recorded, dict) and isinstance(ours, dict)):
            return
        recorded_nodes = [
            item.get("id") for item in recorded.get("value", []) if str(item.get("id", "")).startswith("tvm")
        ]
        our_nodes = [item.get("id") for item in ours.get("value", []) if str(item.get("id", "")).startswith("tvm")]
        self.ids.update(zip(recorded_nodes, our_nodes, strict=False))

    def send(self, method: str, path_and_query: str, body: Any = None, headers: dict[str, str] | None = None):
        url = path_and_query if path_and_query.startswith("http") else self.base + path_and_query
        request = HttpRequest(method, url, headers=headers or {})
        if body is not None:
            request.set_bytes_body(json.dumps(body).encode())
            request.headers["Content-Type"] = "application/json; odata=minimalmetadata"
        response = self.client.send_request(request)
        response.read()
        return response


def _target(replayer: Replayer, recorded_uri: str) -> str:
    parts = urlsplit(recorded_uri)
    if "$skiptoken=" in parts.query:
        assert replayer.next_link, "the recording follows a next link the local service did not give"
        return replayer.next_link
    path = parts.path
    for recorded_id, our_id in replayer.ids.items():
        path = path.replace(recorded_id, our_id)
    return f"{path}?{parts.query}"


def _json(response) -> Any:
    text = response.text()
    return (
        json.loads(text) if text and response.headers.get("Content-Type", "").startswith("application/json") else None
    )


def _signature(body: Any) -> Any:
    """What a poll waits for: the states of the entity (or of each listed entity)."""
    if isinstance(body, dict) and "value" in body and isinstance(body["value"], list):
        return sorted(str(_signature(item)) for item in body["value"])
    if isinstance(body, dict):
        return (body.get("state"), body.get("allocationState"))
    return None


def _shape_mismatches(recorded: Any, ours: Any, path: str = "$") -> list[str]:
    if recorded is None:
        return []
    if isinstance(recorded, dict):
        if not isinstance(ours, dict):
            return [f"{path}: recorded an object, got {type(ours).__name__}"]
        problems = []
        for key, value in recorded.items():
            if key in NOT_EMULATED or key == "odata.nextLink":
                continue
            if key not in ours:
                problems.append(f"{path}.{key}: missing")
            else:
                problems += _shape_mismatches(value, ours[key], f"{path}.{key}")
        return problems
    if isinstance(recorded, list):
        if not isinstance(ours, list):
            return [f"{path}: recorded a list, got {type(ours).__name__}"]
        problems = []
        for index, item in enumerate(recorded):
            # every recorded item must have a counterpart of the same shape (order may differ)
            if not any(not _shape_mismatches(item, candidate) for candidate in ours):
                problems.append(f"{path}[{index}]: no item of the recorded shape among {len(ours)} returned")
        return problems
    if isinstance(recorded, bool) or isinstance(ours, bool):
        return [] if isinstance(recorded, bool) and isinstance(ours, bool) else [f"{path}: type differs"]
    if isinstance(recorded, (int, float)) and isinstance(ours, (int, float)):
        return []
    if type(recorded) is not type(ours):
        return [f"{path}: recorded {type(recorded).__name__}, got {type(ours).__name__}"]
    return []


def _collapse(entries: list[dict[str, Any]]) -> list[tuple[dict[str, Any], bool]]:
    """Consecutive identical GETs are one poll; keep the last (the state the test waited for)."""
    out: list[tuple[dict[str, Any], bool]] = []
    for entry in entries:
        key = (entry["RequestMethod"], entry["RequestUri"], json.dumps(entry["RequestBody"]))
        paging = "$skiptoken=" in entry["RequestUri"]
        if (
            out
            and entry["RequestMethod"] == "GET"
            and not paging
            and (out[-1][0]["RequestMethod"], out[-1][0]["RequestUri"], json.dumps(out[-1][0]["RequestBody"])) == key
        ):
            out[-1] = (entry, True)
        else:
            out.append((entry, False))
    return out


def _windows_cmd(directory: Path) -> str:
    """A PATH with a ``cmd`` program: the recorded tasks ran on Windows nodes as ``cmd /c "echo hello world"``.

    The service runs a command line without a shell, as the real one does, so without it they could not start.
    """
    shim = directory / "cmd"
    shim.write_text('#!/bin/sh\n[ "$1" = /c ] && shift\nexec /bin/sh -c "$*"\n')
    shim.chmod(0o755)
    return f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.mark.parametrize(
    "name",
    [
        "jobs.json",
        "files.json",
        "exception_policy.json",
        "create_pools.json",
        "scale_pools.json",
        # Excerpts of recordings and spec examples (excerpts/README.md says which and how).
        "excerpts/job_schedules.json",
        "excerpts/certificates.json",
        "excerpts/node_extensions.json",
        "excerpts/upload_node_logs.json",
    ],
)
def test_recorded_session_replays(name, tmp_path):
    entries = json.loads((RECORDINGS / name).read_text())["Entries"]
    with run_local_batch_service(extra_args=["--quiet"], env={"PATH": _windows_cmd(tmp_path)}) as service:
        replayer = Replayer(service)
        for method, path, body in SETUP.get(name, []):
            assert replayer.send(method, f"{path}?api-version=2025-06-01", body).status_code == 201
        problems: list[str] = []
        replayed = 0
        for entry, is_poll in _collapse(entries):
            uri, method = entry["RequestUri"], entry["RequestMethod"]
            deadline = time.monotonic() + 30
            while True:
                response = replayer.send(method, _target(replayer, uri), entry["RequestBody"])
                body = _json(response)
                recorded = entry["ResponseBody"] if isinstance(entry["ResponseBody"], dict) else None
                settled = response.status_code == entry["StatusCode"] and (
                    recorded is None or _signature(recorded) == _signature(body)
                )
                if not is_poll or settled or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            replayed += 1
            where = f"{method} {urlsplit(uri).path}"
            if is_poll and not settled:
                problems.append(f"{where}: never reached the recorded state {_signature(entry['ResponseBody'])}")
            if response.status_code != entry["StatusCode"]:
                problems.append(f"{where}: status {response.status_code}, recorded {entry['StatusCode']}: {body}")
                continue
            missing = {
                header
                for header in entry["ResponseHeaders"]
                if header.lower() in CHECKED_HEADERS and header not in response.headers
            }
            if missing:
                problems.append(f"{where}: headers missing {sorted(missing)}")
            if isinstance(entry["ResponseBody"], dict):  # a list here is raw file content
                problems += [f"{where}: {p}" for p in _shape_mismatches(entry["ResponseBody"], body)]
            replayer.learn_ids(entry["ResponseBody"], body)
            if isinstance(body, dict) and "odata.nextLink" in body:
                replayer.next_link = body["odata.nextLink"]
        assert not problems, "\n".join(problems)
        assert replayed == len(_collapse(entries))

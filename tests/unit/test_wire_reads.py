"""The trigger's hot reads skip the SDK's models: they must read a body to exactly what the models give.

A cursor saved by the worker (sync hook, SDK models) and resumed by the triggerer (plain JSON) compares
the file's creation time as a string: any difference would show the output again from the start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure.batch.models import BatchNodeFile, BatchTaskCountsResult

from airflow_provider_azbatch.hooks.translate import (
    counts_from_wire,
    counts_of,
    file_info,
    file_info_from_wire,
    wire_time_iso,
)

TIMES = [
    "2026-12-01T13:09:24.2558300Z",  # the service's seven digits
    "2026-12-01T13:09:24Z",
    "2026-12-01T13:09:24.1Z",
    "2026-12-01T13:09:24.123Z",
    "2026-12-01T13:09:24.123456789Z",
    "2026-12-01T13:09:24.5+02:00",
    "2026-12-01T13:09:24.000000Z",
]


@pytest.mark.parametrize("wire", TIMES)
def test_a_timestamp_reads_as_the_sdk_model_reads_it(wire: str) -> None:
    model = BatchNodeFile({"properties": {"creationTime": wire, "contentLength": 1}})
    assert model.properties.creation_time is not None
    assert wire_time_iso(wire) == model.properties.creation_time.isoformat()


@pytest.mark.parametrize(
    "entry",
    [
        {
            "name": "stdout.txt",
            "url": "https://acct.region.batch.azure.com/jobs/j/tasks/t/files/stdout.txt",
            "isDirectory": False,
            "properties": {
                "creationTime": "2026-12-01T13:09:24.2558300Z",
                "lastModified": "2026-12-01T13:10:00.1000000Z",
                "contentLength": 1200,
                "contentType": "text/plain",
                "fileMode": "0o100644",
            },
        },
        {"name": "stderr.txt", "isDirectory": False, "properties": {"contentLength": 0}},
    ],
)
def test_a_file_entry_reads_as_the_sdk_model_reads_it(entry: dict) -> None:
    assert file_info_from_wire(entry) == file_info(BatchNodeFile(entry))


def test_task_counts_read_as_the_sdk_model_reads_them() -> None:
    body = {
        "taskCounts": {"active": 3, "running": 2, "completed": 7, "succeeded": 6, "failed": 1},
        "taskSlotCounts": {"active": 3, "running": 2, "completed": 7, "succeeded": 6, "failed": 1},
    }
    assert counts_from_wire(body) == counts_of(BatchTaskCountsResult(body))


def _recorded_file_entries() -> list[dict]:
    """Every file listed in the responses recorded from the real Batch service."""
    recordings = Path(__file__).parents[2] / "local-azure-batch" / "tests" / "fixtures" / "batch-service" / "recordings"
    entries = []
    for path in sorted(recordings.rglob("*.json")):
        for exchange in json.loads(path.read_text()).get("Entries", []):
            body = exchange.get("ResponseBody")
            listing = exchange["RequestMethod"] == "GET" and "/files" in exchange["RequestUri"].split("?")[0]
            if listing and isinstance(body, dict):
                entries += body.get("value", [])
    return entries


def test_every_recorded_file_listing_reads_as_the_sdk_model_reads_it() -> None:
    entries = _recorded_file_entries()
    assert len(entries) >= 20
    for entry in entries:
        assert file_info_from_wire(entry) == file_info(BatchNodeFile(entry)), entry["name"]

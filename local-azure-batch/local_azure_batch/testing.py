"""Start the local Batch service from Python code and tests.

    from local_azure_batch.testing import run_local_batch_service

    with run_local_batch_service() as batch:
        client = BatchClient(batch.url, AzureNamedKeyCredential(batch.account_name, batch.account_key))

In pytest, enable the plugin (``pytest_plugins = ["local_azure_batch.pytest_plugin"]`` in a conftest, or
``-p local_azure_batch.pytest_plugin``) for a session-scoped ``local_batch_service`` fixture, or start
your own with different options.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .account import (
    DEV_ACCOUNT_KEY,
    DEV_ACCOUNT_NAME,
    DEV_CLIENT_ID,
    DEV_CLIENT_SECRET,
    DEV_LOCATION,
    DEV_NO_ROLE_CLIENT_ID,
    DEV_NO_ROLE_CLIENT_SECRET,
    DEV_RESOURCE_GROUP,
    DEV_SUBSCRIPTION_ID,
    DEV_TENANT_ID,
)

STARTUP_TIMEOUT_SECONDS = 30.0


@dataclass
class LocalBatchService:
    """A running local Batch service (a child process) and how to reach it."""

    url: str
    account_name: str
    account_key: str
    process: subprocess.Popen[str]
    ca_file: str | None = None
    tenant_id: str = DEV_TENANT_ID
    subscription_id: str = DEV_SUBSCRIPTION_ID
    client_id: str = DEV_CLIENT_ID
    client_secret: str = DEV_CLIENT_SECRET
    # A principal of the tenant without any role (its tokens are valid; Batch and ARM refuse them).
    no_role_client_id: str = DEV_NO_ROLE_CLIENT_ID
    no_role_client_secret: str = DEV_NO_ROLE_CLIENT_SECRET
    # Where the management plane (--tls) says the account is (the defaults; --resource-group, --location).
    resource_group: str = DEV_RESOURCE_GROUP
    location: str = DEV_LOCATION
    output: deque[str] = field(default_factory=lambda: deque(maxlen=2000))

    # -- administration endpoints -------------------------------------------------------------------
    def _admin(self, method: str, path: str, body: str | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}/_emulator/{path}", method=method, data=body.encode() if body is not None else None
        )
        context = None
        if self.ca_file:
            import ssl

            context = ssl.create_default_context(cafile=self.ca_file)
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read())

    def request_counts(self) -> dict[str, int]:
        """Requests served per REST operation id since start (or the last reset)."""
        return self._admin("GET", "stats")["requests"]

    def reset_request_counts(self) -> None:
        self._admin("DELETE", "stats")

    def request_log(self, *, jobs: Sequence[str] = (), operations: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The latest requests served (``--request-log`` of them), oldest first, each ``{"at": epoch seconds,
        "operation": REST operation id, "job": the job its path names or None, "status": HTTP status, 0 if
        dropped}``; only those of ``jobs`` and ``operations`` when given."""
        query = urllib.parse.urlencode([*(("job", job) for job in jobs), *(("operation", op) for op in operations)])
        return self._admin("GET", f"requests?{query}" if query else "requests")["requests"]

    def clear_request_log(self) -> None:
        self._admin("DELETE", "requests")

    def set_faults(self, spec: str) -> None:
        """Replace the fault injection rules (see the README's fault syntax); '' turns them off."""
        self._admin("PUT", "faults", spec)

    def set_quota(self, **quotas: int | None) -> dict[str, int | None]:
        """Change the account's quotas while it runs: ``jobs``, ``pools`` or ``nodes`` (None: no limit).

        Quotas not named stay as they are; returns all of them as they now stand.
        """
        return self._admin("PUT", "quota", json.dumps(quotas))

    def quota(self) -> dict[str, int | None]:
        return self._admin("GET", "quota")

    def set_storage(
        self, *, blob_endpoints: dict[str, str | None] | None = None, mount_sources: dict[str, str | None] | None = None
    ) -> dict[str, dict[str, str]]:
        """Add (or with None remove) Blob endpoints of storage accounts and local directories standing for mount
        sources; returns both as they now stand."""
        body: dict[str, Any] = {}
        if blob_endpoints is not None:
            body["blobEndpoints"] = blob_endpoints
        if mount_sources is not None:
            body["mountSources"] = mount_sources
        return self._admin("PUT", "storage", json.dumps(body))

    def set_host_list_order(self, order: str) -> str:
        """Where multi-instance tasks started from now on find the primary's node in ``AZ_BATCH_HOST_LIST``:
        ``primary-first`` or ``primary-last``; returns the order before."""
        before = self._admin("GET", "hostlist")["order"]
        self._admin("PUT", "hostlist", json.dumps({"order": order}))
        return before

    def set_spot_capacity(self, capacity: int | None) -> None:
        """How many Spot nodes of the account can be up at once (None: no limit); pools seeking Spot nodes get them
        as it allows."""
        self._admin("PUT", "spot", json.dumps({"capacity": capacity}))

    def preempt(self, pool_id: str, node_id: str) -> None:
        """Take a Spot node's VM back, as Azure does: the node is ``preempted``, its running tasks are requeued; it
        comes back (same id) when there is Spot capacity."""
        self._admin("POST", f"pools/{pool_id}/nodes/{node_id}/preempt", "")

    def make_unusable(
        self, pool_id: str, node_id: str, code: str, message: str, details: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Fail a node as Batch does when it cannot run tasks on it: ``unusable``, its ``errors`` the one given
        (``details``: its errorDetails, name to value), its running tasks requeued. Returns the node's pool, id,
        state and errors."""
        error: dict[str, Any] = {"code": code, "message": message}
        if details:
            error["errorDetails"] = [{"name": name, "value": value} for name, value in details.items()]
        return self._admin("POST", f"pools/{pool_id}/nodes/{node_id}/unusable", json.dumps(error))

    def log_text(self) -> str:
        return "\n".join(self.output)


@contextlib.contextmanager
def run_local_batch_service(
    *,
    tls: bool = False,
    account_name: str = DEV_ACCOUNT_NAME,
    account_key: str = DEV_ACCOUNT_KEY,
    extra_args: Sequence[str] = (),
    task_root: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[LocalBatchService]:
    """Run ``python -m local_azure_batch`` on a free port until the block ends."""
    command = [
        sys.executable,
        "-m",
        "local_azure_batch",
        "--account-name",
        account_name,
        "--account-key",
        account_key,
        *(["--tls"] if tls else []),
        *(["--task-root", str(task_root)] if task_root else []),
        *extra_args,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,
    )
    output: deque[str] = deque(maxlen=2000)
    url = ca_file = None
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    assert process.stdout is not None
    while url is None:
        line = process.stdout.readline()
        if not line:
            process.wait(timeout=5)
            raise RuntimeError(f"the local Batch service exited during startup:\n{''.join(output)}")
        output.append(line.rstrip("\n"))
        if line.startswith("AZBATCH_EMULATOR_CA="):
            ca_file = line.split("=", 1)[1].strip()
        if line.startswith("AZBATCH_EMULATOR_URL="):
            url = line.split("=", 1)[1].strip()
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the local Batch service did not start within 30 seconds")

    def drain() -> None:  # keep the pipe from filling up
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    service = LocalBatchService(url, account_name, account_key, process, ca_file, output=output)
    try:
        yield service
    finally:
        stop_process(process)
        reader.join(timeout=5)


def stop_process(process: subprocess.Popen[str], timeout: float = 20.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

"""Azurite's Blob service (npm ``azurite``, which ``make test`` installs) on a free loopback port, for the tests
of blobfuse mounts: the local service copies a container from it as it would mount one."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from azure.core.credentials import AzureNamedKeyCredential
from azure.storage.blob import ContainerClient, ContainerSasPermissions, generate_container_sas

from tests.helpers import wait_until

# Azurite's documented development account (public).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
REPOSITORY = Path(__file__).resolve().parents[2]


def _command() -> str:
    local = REPOSITORY / "node_modules" / ".bin" / "azurite-blob"
    found = str(local) if local.exists() else shutil.which("azurite-blob")
    if found is None:
        raise RuntimeError("Azurite is not installed: run `npm ci` in the repository (make test does it)")
    return found


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def run_azurite() -> Iterator[str]:
    """Yields the account's Blob endpoint, ``http://127.0.0.1:<port>/devstoreaccount1``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    workspace = tempfile.mkdtemp(prefix="azurite-")
    process = subprocess.Popen(
        [
            _command(),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=workspace,
        start_new_session=True,
    )
    try:
        wait_until(lambda: process.poll() is not None or _listening(port), timeout=60, what="Azurite listening")
        if process.poll() is not None:
            raise RuntimeError(f"Azurite exited at start with code {process.returncode}")
        yield f"http://127.0.0.1:{port}/{ACCOUNT}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(workspace, ignore_errors=True)


@contextlib.contextmanager
def writable_container(endpoint: str, prefix: str) -> Iterator[tuple[ContainerClient, str]]:
    """A new container on Azurite at ``endpoint``, and a SAS URL that may create and write blobs in it (what
    Batch is given to upload a node's logs to)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    client = ContainerClient(endpoint, name, credential=AzureNamedKeyCredential(ACCOUNT, KEY))
    client.create_container()
    sas = generate_container_sas(
        ACCOUNT,
        name,
        account_key=KEY,
        permission=ContainerSasPermissions(write=True, create=True),
        expiry=datetime.now(timezone.utc) + timedelta(hours=1),
    )
    try:
        yield client, f"{endpoint}/{name}?{sas}"
    finally:
        client.close()

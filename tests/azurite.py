"""Azurite (the Azure Storage emulator, npm ``azurite``) for tests that need Blob storage.

``make test`` installs it from the committed npm lock file; the tests start it on a free loopback port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parent.parent
# Azurite's documented development account (public, like the local Batch service's).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Azurite:
    url: str  # the account's blob endpoint: http://127.0.0.1:<port>/devstoreaccount1
    account: str = ACCOUNT
    key: str = KEY

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};BlobEndpoint={self.url};"
        )


def azurite_command() -> str:
    local = ROOT / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    found = shutil.which("azurite-blob")
    if found is None:
        raise RuntimeError("Azurite is not installed: run `npm ci` in the repository (make test does it)")
    return found


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def run_azurite(*, oauth_cert: Path | None = None, oauth_key: Path | None = None) -> Iterator[Azurite]:
    """Azurite's blob service on a free port; with ``oauth_cert`` and ``oauth_key``, over https and taking Entra ID
    tokens too (``--oauth basic``: it checks a token's issuer, audience and lifetime, not its signature, and grants
    every role; the local Batch service's authority issues such tokens)."""
    oauth = ["--oauth", "basic", "--cert", str(oauth_cert), "--key", str(oauth_key)] if oauth_cert and oauth_key else []
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Azurite still writes a small debug/lock file in its working directory: give it its own.
    workspace = tempfile.mkdtemp(prefix="azurite-")
    log = open(Path(workspace) / "azurite.log", "wb")  # noqa: SIM115 - closed when Azurite stops
    process = subprocess.Popen(
        [
            azurite_command(),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",
            *oauth,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workspace,
        start_new_session=True,
    )
    try:
        wait_until(lambda: process.poll() is not None or _port_open(port), timeout=60, what="Azurite listening")
        if process.poll() is not None:
            output = (Path(workspace) / "azurite.log").read_text(errors="replace")
            raise RuntimeError(f"Azurite exited at start with code {process.returncode}:\n{output}")
        yield Azurite(url=f"{'https' if oauth else 'http'}://127.0.0.1:{port}/{ACCOUNT}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
        shutil.rmtree(workspace, ignore_errors=True)

"""Blob storage for the environment: Azurite, the Azure Storage emulator (an npm package, run by Node.js)."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_azbatch.devenv.errors import DevEnvError
from airflow_provider_azbatch.devenv.processes import ProcessGroups

# The version npx runs where no Azurite is installed: the one the repository's package.json pins (a test checks).
AZURITE_VERSION = "3.37.0"
# Azurite's documented development account and key: public on purpose, like the local Batch service's.
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# What needs a storage account, for the message shown when there is none.
NEEDS_STORAGE = "@task.azure_batch, workspaces and Blob inputs/outputs"


@dataclass(frozen=True)
class Azurite:
    url: str  # the account's Blob endpoint: http://127.0.0.1:<port>/devstoreaccount1
    source: str  # how it was found, for the banner
    account: str = ACCOUNT
    key: str = KEY


def find_azurite(explicit: str | None, search: Sequence[Path]) -> tuple[list[str], str] | None:
    """The command that starts Azurite's Blob service, and how it was found; None without Node.js (``node``).

    In order: ``explicit``, ``node_modules/.bin/azurite-blob`` under a folder of ``search`` (a clone of the
    repository has one), ``azurite-blob`` on PATH (``npm install -g azurite``), then ``npx`` running the pinned
    version (downloaded on first use)."""
    if explicit:
        return [explicit], explicit
    if shutil.which("node") is None:
        return None  # azurite-blob is a Node.js script: a node_modules without Node cannot run it
    for folder in search:
        local = folder / "node_modules" / ".bin" / "azurite-blob"
        if local.is_file():
            return [str(local)], str(local)
    installed = shutil.which("azurite-blob")
    if installed:
        return [installed], installed
    npx = shutil.which("npx")
    if npx:
        return [
            npx,
            "--yes",
            "--package",
            f"azurite@{AZURITE_VERSION}",
            "azurite-blob",
        ], f"npx azurite@{AZURITE_VERSION}"
    return None


def start_azurite(
    groups: ProcessGroups, command: list[str], source: str, workdir: Path, env: dict[str, str]
) -> Azurite:
    """Start Azurite on a free loopback port, its blobs in ``workdir`` (part of the state a restart may keep)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "azurite.log"
    process = groups.start(
        "azurite",
        [
            *command,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(workdir),
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",
        ],
        env=env,
        log=log,
        # Azurite writes a debug/lock file in its working directory.
        cwd=workdir,
    )
    # npx downloads Azurite on its first use.
    deadline = time.monotonic() + (300 if source.startswith("npx") else 60)
    while not port_open(port):
        if process.poll() is not None:
            raise DevEnvError(f"Azurite ({source}) exited at start with code {process.returncode}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise DevEnvError(f"Azurite ({source}) did not listen on port {port} in time:\n{_tail(log)}")
        time.sleep(0.2)
    return Azurite(url=f"http://127.0.0.1:{port}/{ACCOUNT}", source=source)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"

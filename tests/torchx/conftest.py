"""``torchx ...`` command lines as a user runs them (subprocesses), against the local Batch service."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.batch import models as m

from tests.helpers import wait_until

pytest.importorskip("torchx", reason="the [torchx] extra is not installed")

HANDLE = re.compile(r"^azure_batch://torchx/(?P<app_id>[^/\s]+)$")


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def handle(self) -> str:
        """The app handle `torchx run` printed: stdout's only line."""
        lines = self.out.splitlines()
        assert len(lines) == 1, f"stdout is not one app handle: {self.out!r}\n{self.err}"
        assert HANDLE.match(lines[0]), f"stdout is not an app handle: {self.out!r}\n{self.err}"
        return lines[0]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The current directory of the commands (torchx's default workspace)."""
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


@pytest.fixture
def torchx(workdir: Path) -> Callable[..., Run]:
    """``torchx("status", handle, env={...})``: ``python -m torchx.cli.main status <handle>``."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Run:
        # Workspaces staged apart from the DAG tests', which count the archives of their container.
        environment = {**os.environ, "AIRFLOW__AZBATCH__WORKSPACE_CONTAINER": "torchx-workspaces", **(env or {})}
        done = subprocess.run(
            [sys.executable, "-m", "torchx.cli.main", *args],
            cwd=workdir,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    return run


def job_of(handle: str) -> str:
    return handle.rsplit(":", 1)[1]


def pool_gone(batch_client, job_id: str) -> bool:
    """The pool made for the job is deleted (and with it every node's files)."""
    pool_id = batch_client.get_job(job_id).execution_info.pool_id
    return pool_id not in {pool.id for pool in batch_client.list_pools()}


def run_until_it_fails(runner, app, batch_client):
    """Run ``app``, wait for TorchX to call it FAILED (within a minute: fail fast) and for Batch to have ended its
    job; the app's status then and the job's id."""
    from torchx.specs import AppState

    started = time.monotonic()
    handle = runner.run(app, "azure_batch", cfg={}, workspace=None)
    wait_until(
        lambda: (found := runner.status(handle)) is not None and found.state == AppState.FAILED,
        timeout=60,
        interval=1,
        what="the app FAILED",
    )
    assert time.monotonic() - started < 60
    job_id = job_of(handle)
    wait_until(
        lambda: batch_client.get_job(job_id).state == m.BatchJobState.COMPLETED, timeout=60, what="the job ended"
    )
    return runner.status(handle), job_id

"""``torchx ...`` command lines as a user runs them (subprocesses), against the local Batch service."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

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

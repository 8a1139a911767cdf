"""Running ``airflow azbatch ...``: in-process through Airflow's own parser, or as a user does (a subprocess)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

AIRFLOW = Path(sys.executable).with_name("airflow")


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        """stdout's lines without trailing blanks (rich pads table cells), the last blank lines dropped."""
        lines = [line.rstrip() for line in self.out.split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    @property
    def error(self) -> str:
        """stderr's one line (what a failed command says)."""
        return self.err.strip()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``cli("jobs", "list")`` runs ``airflow azbatch jobs list`` in this process, as Airflow parses it."""
    from airflow.cli import cli_parser

    parser = cli_parser.get_parser()

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            args = parser.parse_args(["azbatch", *argv])
            args.func(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


@pytest.fixture
def airflow_cli() -> Callable[..., Result]:
    """``airflow azbatch ...`` as a separate process, with this test's environment (AIRFLOW_HOME, connections)."""

    def run(*argv: str, timeout: float = 120) -> Result:
        env = dict(os.environ)
        # A deployment does not run in unit test mode (which logs its config file at start).
        env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
        done = subprocess.run(
            [str(AIRFLOW), "azbatch", *argv], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def jobs_to_clean(batch_client) -> Iterator[list[str]]:
    """Jobs a test made: terminated at its end, so that their tasks free the shared pool's slots."""
    made: list[str] = []
    yield made
    from azure.batch.models._models import BatchJobTerminateOptions
    from azure.core.exceptions import HttpResponseError

    for job_id in made:
        with contextlib.suppress(HttpResponseError):  # ended already
            batch_client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason="TestEnded"))

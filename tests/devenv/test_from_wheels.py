"""`azbatch-dev` as someone gets it who installs the provider from the package index: both distributions built
as wheels, installed with the ``[local]`` extra into a fresh virtual environment, run from a folder that is not
a clone (Azurite found on PATH, as after ``npm install -g azurite``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.devenv.devenv_process import DevEnv
from tests.devenv.test_devenv import DAGS_TEST, TWO_NODE_LINES, assert_nothing_left, batch_lines

pytestmark = [pytest.mark.packaging, pytest.mark.azurite]

ROOT = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns(
    ".venv", ".venv-*", "node_modules", ".git", ".test-home", ".demo*", "build", "*.egg-info", "__pycache__"
)
# How the how-to installs it (run here with the wheels in place of the index's distributions).
INSTALL = "pip install 'airflow-provider-azbatch[local]'"


def _run(*command: str | Path, cwd: Path) -> None:
    result = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


# Installing Airflow into a fresh venv takes 1-2 minutes from pip's warm cache, many more on a busy machine.
@pytest.mark.timeout(1800)
def test_the_command_from_wheels_in_a_fresh_venv_runs_a_dag(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    wheels = tmp_path / "wheels"
    for project in (source, source / "local-azure-batch"):
        _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", wheels, project, cwd=tmp_path)
    (provider,) = wheels.glob("airflow_provider_azbatch-*.whl")
    (service,) = wheels.glob("local_azure_batch-*.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    # The how-to's command, with the wheels standing for the index's distributions and the committed constraints.
    pip, install, _ = INSTALL.split(" ", 2)
    _run(
        venv / "bin" / pip,
        install,
        "--quiet",
        "--disable-pip-version-check",
        # Python compiles what it imports: compiling all of Airflow at install time is slow, and most is never used.
        "--no-compile",
        "-c",
        ROOT / "constraints.txt",
        f"{provider}[local]",
        service,
        cwd=tmp_path,
    )

    project = tmp_path / "project"
    shutil.copytree(Path(__file__).parent / "dags", project / "dags")
    env = DevEnv(DAGS_TEST, project, venv / "bin", extra_env={"PATH": _path_with_azurite_only()})
    try:
        assert env.wait(timeout=600) == 0, env.output
        assert f"Starting Azurite ({shutil.which('azurite-blob')})" in env.output
        assert batch_lines(env.lines, TWO_NODE_LINES, whole=False) == Counter(TWO_NODE_LINES)
        assert "site-packages" not in env.exports()["AIRFLOW__CORE__DAGS_FOLDER"]
        assert_nothing_left(env)
    finally:
        env.kill()


def _path_with_azurite_only() -> str:
    """PATH without this checkout's venv: the fresh venv's bin goes first (DevEnv adds it)."""
    azurite, node = shutil.which("azurite-blob"), shutil.which("node")
    assert azurite, "Azurite is not on PATH (make test puts node_modules/.bin there)"
    assert node, "Node.js is not on PATH"
    return ":".join(dict.fromkeys([str(Path(azurite).parent), str(Path(node).parent), "/usr/bin", "/bin"]))

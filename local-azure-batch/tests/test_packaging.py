"""The service's wheel, installed alone in a fresh virtual environment, runs and answers a Batch request."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from local_azure_batch.testing import stop_process

PROJECT = Path(__file__).resolve().parents[1]


def _run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command}: {result.stdout}\n{result.stderr}"
    return result


@pytest.mark.packaging
def test_the_wheel_installs_and_serves_from_a_fresh_venv(tmp_path):
    # Built from a copy: setuptools leaves build/ behind in the tree it builds, and would reuse it.
    source = tmp_path / "source"
    shutil.copytree(PROJECT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".*_cache"))
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", wheels, source, cwd=tmp_path)
    (wheel,) = wheels.glob("local_azure_batch-*.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    # Its dependencies come from the package registry, as for anyone installing the wheel.
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel, cwd=tmp_path)

    where = _run(python, "-c", "import local_azure_batch; print(local_azure_batch.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(venv)
    # The VM sizes pools may name ship as package data.
    sizes = _run(
        python,
        "-c",
        "from local_azure_batch.model.vm_sizes import known_vm_sizes; print(len(known_vm_sizes()))",
        cwd=tmp_path,
    )
    assert int(sizes.stdout) > 700
    usage = _run(python, "-m", "local_azure_batch", "--help", cwd=tmp_path).stdout
    assert "--job-quota" in usage
    assert "--pool-quota" in usage

    process = subprocess.Popen(
        [str(python), "-m", "local_azure_batch", "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url = _service_url(process)
        # No credentials: the service's own JSON error proves the Batch API is being served.
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{url}/jobs?api-version=2025-06-01", timeout=10)
        assert caught.value.code == 401
        assert caught.value.headers["Content-Type"] == "application/json; odata=minimalmetadata"
        body = json.loads(caught.value.read())
        assert body["code"] == "AuthenticationFailed"
        assert body["message"]["value"].startswith(
            "Server failed to authenticate the request. The Authorization header is missing.\nRequestId:"
        )
    finally:
        stop_process(process)
    assert process.returncode == 0


def _service_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    output = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        if line.startswith("AZBATCH_EMULATOR_URL="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"the installed service did not start:\n{''.join(output)}")

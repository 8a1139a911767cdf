"""The runner that calls an ``@task.azure_batch`` function on a node: run here as the node runs it (a
subprocess in a working directory), reading the call file and writing the result file."""

from __future__ import annotations

import base64
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "airflow_provider_azbatch" / "decorators" / "remote_runner.py"


def _run(tmp_path: Path, source: str, name: str, *, args=(), kwargs=None, serializer="json", limit=1_000_000, env=None):
    staging = tmp_path / ".azbatch"
    staging.mkdir(exist_ok=True)
    call = {"function": name, "source": source, "serializer": serializer, "python": "3.11", "max_result_bytes": limit}
    if serializer == "json":
        call |= {"args": list(args), "kwargs": kwargs or {}}
    else:
        call["payload"] = base64.b64encode(pickle.dumps((list(args), kwargs or {}))).decode()
    (staging / "call.json").write_text(json.dumps(call))
    done = subprocess.run(
        [sys.executable, str(RUNNER), ".azbatch/call.json", "result.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        timeout=60,
    )
    result = json.loads((tmp_path / "result.json").read_text()) if (tmp_path / "result.json").exists() else None
    return done, result


def test_a_call_returns_its_value_as_json(tmp_path):
    source = "def add(a, b, *, scale=1):\n    return {'sum': (a + b) * scale, 'items': [a, b]}\n"
    done, result = _run(tmp_path, source, "add", args=[2, 3], kwargs={"scale": 10})
    assert done.returncode == 0, done.stderr
    assert result == {"value": {"sum": 50, "items": [2, 3]}}


def test_a_raising_function_says_what_and_where(tmp_path):
    source = "def check(n):\n    if n < 10:\n        raise ValueError(f'only {n}')\n"
    done, result = _run(tmp_path, source, "check", args=[3])
    assert done.returncode == 1
    assert "Traceback (most recent call last):" in done.stderr
    assert done.stderr.rstrip().endswith("ValueError: only 3")
    assert result["error"]["type"] == "ValueError"
    assert result["error"]["message"] == "only 3"
    frame = result["error"]["frame"]
    assert (frame["function"], frame["line"], frame["code"]) == ("check", 3, "raise ValueError(f'only {n}')")
    assert frame["file"].endswith("/.azbatch/check.py")


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (
            "def f():\n    return {1, 2}\n",
            "cannot be returned as JSON: set: Object of type set is not JSON serializable",
        ),
        ("def f():\n    return 'x' * 200\n", "the return value of f() is 213 bytes as sent back; at most 100 bytes"),
    ],
)
def test_a_value_that_cannot_come_back_fails_on_the_node(tmp_path, source, words):
    done, result = _run(tmp_path, source, "f", limit=100)
    assert done.returncode == 1
    assert words in done.stderr
    assert result["error"]["type"] == "ReturnValueError"
    assert words in result["error"]["message"]


def test_an_exit_code_of_the_function_is_the_tasks(tmp_path):
    done, result = _run(tmp_path, "def f():\n    import sys\n    sys.exit(42)\n", "f")
    assert done.returncode == 42
    assert result["error"]["type"] == "SystemExit"


def test_pickle_carries_what_json_cannot_and_the_workspace_is_importable(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "helpers.py").write_text("def double(values):\n    return {v * 2 for v in values}\n")
    source = "def f(values):\n    import helpers\n    return helpers.double(values)\n"
    done, result = _run(
        tmp_path, source, "f", args=[{1, 2}], serializer="pickle", env={"AZBATCH_WORKSPACE": str(workspace)}
    )
    assert done.returncode == 0, done.stderr
    assert pickle.loads(base64.b64decode(result["pickle"])) == {2, 4}

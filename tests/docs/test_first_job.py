"""docs/tutorials/first-job.md's "make it fail" step, as a reader does it: the edit of
docs/examples/first_job_failure.py made in a copy of example_dags/example_azbatch_hello.py, the DAG run, and the
failure the page describes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.airflow_helpers import run_dag

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "example_dags" / "example_azbatch_hello.py"
PAGE = ROOT / "docs" / "tutorials" / "first-job.md"
FAILED_TASK = (
    "Task 'shard-2' failed with exit code 3 "
    "(FailureExitCode: The task exited with an exit code representing a failure)."
)


def _edit() -> tuple[str, str]:
    spec = importlib.util.spec_from_file_location(
        "first_job_failure", ROOT / "docs" / "examples" / "first_job_failure.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line = next(text for text in module.EDIT.splitlines() if text.strip().startswith("+"))
    return module.ANCHOR, line


def _edited_example(tmp_path: Path):  # type: ignore[no-untyped-def]
    anchor, line = _edit()
    source = HELLO.read_text(encoding="utf-8")
    assert source.count(anchor) == 1, "the tutorial's edit no longer fits example_azbatch_hello.py"
    edited = tmp_path / "example_azbatch_hello_fails.py"
    edited.write_text(source.replace(anchor, f"{anchor}\n{line}"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("example_azbatch_hello_fails", edited)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def test_the_edit_fails_shard_2_alone_as_the_tutorial_says(airflow_db, azbatch_default, tmp_path):
    dag = _edited_example(tmp_path)
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "process_shards": "failed",
        "report": "upstream_failed",
    }
    error = next(line for line in logs if line.startswith("Azure Batch job 'example_azbatch_hello-process_shards-"))
    assert error.endswith(
        "' failed: 1 of 3 tasks failed.\n" + FAILED_TASK + " Last 2 lines of its stderr:\n"
        "    shard 2: done\n    shard 2: cannot read its input"
    ), error
    assert "[shard-1] shard 1: processed record 5 on " in "\n".join(logs)
    # What the page quotes is what the log says.
    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert FAILED_TASK in page
    assert "`shard 2: cannot read its input`" in page

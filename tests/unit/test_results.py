"""What a finished job reports: the summary table and the failure message."""

from __future__ import annotations

from airflow_provider_azbatch.model.outcomes import JobOutcomes, TaskOutcome
from airflow_provider_azbatch.model.records import FileEnd
from airflow_provider_azbatch.results.failure_report import failure_report
from airflow_provider_azbatch.results.summary import MAX_SUMMARY_ROWS, summary_lines
from airflow_provider_azbatch.watching.drivers import run_sync


def _outcome(task_id, *, ok=True, state="completed", exit_code=None, seconds=1.25, node="tvmps_node-0"):
    return TaskOutcome(
        id=task_id,
        state=state,
        exit_code=None if state != "completed" else exit_code if exit_code is not None else (0 if ok else 3),
        result=None if state != "completed" else ("success" if ok else "failure"),
        retry_count=0,
        node_id=node if state != "active" else None,
        duration_seconds=seconds if state == "completed" else None,
    )


def test_summary_of_a_small_job_is_a_table_in_a_log_group():
    outcomes = JobOutcomes.collect(
        [
            _outcome("prepare", seconds=12.04),
            _outcome("train", ok=False, seconds=3725.0, node="tvmps_" + "a" * 64 + "_d"),
            _outcome("report", state="active"),
        ]
    )
    assert summary_lines("job-1", outcomes) == [
        "::group::Batch job job-1: 3 task(s), 1 active, 1 failed, 1 succeeded",
        "task     state      exit  node                     duration",
        "prepare  succeeded  0     tvmps_node-0             12.0 s",
        "train    failed     3     tvmps_aaaaa…aaaaaaaaa_d  1 h 02 min",
        "report   active     -     -                        -",
        "::endgroup::",
    ]


def test_summary_of_a_big_job_counts_and_lists_only_the_unsuccessful():
    tasks = [_outcome(f"t{i:03d}", ok=i != 7, seconds=75.0) for i in range(MAX_SUMMARY_ROWS + 1)]
    lines = summary_lines("big", JobOutcomes.collect(tasks))
    assert lines[0] == "::group::Batch job big: 51 task(s), 1 failed, 50 succeeded"
    assert lines[1] == "51 tasks: one row per task only up to 50; unsuccessful ones:"
    assert lines[3] == "t007  failed  3     tvmps_node-0  1 min 15 s"
    assert lines[-1] == "::endgroup::"
    assert len(lines) == 5


class Files:
    """The read primitives a failure report uses, over in-memory stderr files."""

    def __init__(self, stderr: dict[str, bytes], uploaded: dict[str, bytes]) -> None:
        self.stderr = stderr
        self.uploaded = uploaded

    def read_task_file_tail(self, job_id, task_id, path, max_bytes):
        data = self.stderr.get(task_id)
        return None if data is None else FileEnd(data[-max_bytes:], whole=len(data) <= max_bytes)

    def get_uploaded_log_size(self, location, job_id, task_id, name):
        data = self.uploaded.get(task_id)
        return None if data is None else len(data)

    def read_uploaded_log(self, location, job_id, task_id, name, start, end):
        return self.uploaded[task_id][start : end + 1]


def test_failure_report_quotes_stderr_from_the_node_or_from_blob():
    outcomes = JobOutcomes.collect(
        [_outcome("a", ok=False), _outcome("b", ok=False, exit_code=9), _outcome("c"), _outcome("d", state="active")]
    )
    files = Files({"a": b"warming up\nboom: disk full\n"}, {"b": b"from blob\n"})
    report = run_sync(
        failure_report(
            "job-9",
            outcomes,
            tail_lines=1,
            terminate_reason="UserTerminate",
            log_location={"container": "l", "prefix": "p"},
        ),
        files,
    )
    assert report == (
        "Azure Batch job 'job-9' failed: 2 of 4 tasks failed, 1 did not finish "
        "(the job was terminated: UserTerminate).\n"
        "Task 'a' failed with exit code 3. Last 1 lines of its stderr:\n    boom: disk full\n"
        "Task 'b' failed with exit code 9. Last 1 lines of its stderr:\n    from blob\n"
        "Did not finish: d (active)"
    )

"""``airflow azbatch logs`` against the local Batch service (and Azurite for logs whose node is gone)."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest
from azure.batch import models as m

from tests.cli.batch_jobs import create_job, task, wait_job_done
from tests.helpers import pool_options, wait_until

EMIT = Path(__file__).with_name("emit_slowly.py")

STAMPED = (
    "echo 'before any time'; "
    "echo '2026-01-01T10:00:00Z start'; "
    "echo '2026-01-01T10:00:05Z step one'; "
    "echo '  detail of step one'; "
    "echo '2026-01-01 10:00:10,250 INFO step two'; "
    "echo '[2026-01-01T11:00:15+01:00] an hour ahead, so 10:00:15 UTC'; "
    "echo '2026-01-01T10:00:20.5Z done'"
)


def expected_stdout(count: int) -> list[str]:
    return [f"line {n} end" if n % 10 == 0 else f"line {n}" for n in range(1, count + 1)]


def expected_stderr(count: int) -> list[str]:
    return [f"err {n}" for n in range(1, count + 1) if n % 3 == 0]


@pytest.fixture(scope="module")
def logs_job(batch_client, shared_pool):
    create_job(
        batch_client,
        "cli-logs",
        shared_pool,
        [
            task("greet", "echo hello; echo world; echo oops >&2"),
            task("partial", "printf 'no end'"),
            task("plain", "seq 1 5"),
            task("stamped", STAMPED),
        ],
    )
    wait_job_done(batch_client, "cli-logs")
    return "cli-logs"


def test_one_task_stdout_and_stderr_as_they_are(cli, azbatch_default, logs_job):
    stdout = cli("logs", logs_job, "greet")
    stderr = cli("logs", logs_job, "greet", "--stderr")
    partial = cli("logs", logs_job, "partial")

    assert (stdout.code, stdout.out, stdout.err) == (0, "hello\nworld\n", "")
    assert (stderr.code, stderr.out) == (0, "oops\n")
    assert partial.out == "no end\n"


def test_every_task_prefixed_like_the_operator_log(cli, azbatch_default, logs_job):
    result = cli("logs", logs_job)
    only_stderr = cli("logs", logs_job, "--stderr")

    assert result.code == 0, result.err
    assert result.lines == [
        "[greet] hello",
        "[greet] world",
        "[greet:stderr] oops",
        "[partial] no end",
        "[plain] 1",
        "[plain] 2",
        "[plain] 3",
        "[plain] 4",
        "[plain] 5",
        "[stamped] before any time",
        "[stamped] 2026-01-01T10:00:00Z start",
        "[stamped] 2026-01-01T10:00:05Z step one",
        "[stamped]   detail of step one",
        "[stamped] 2026-01-01 10:00:10,250 INFO step two",
        "[stamped] [2026-01-01T11:00:15+01:00] an hour ahead, so 10:00:15 UTC",
        "[stamped] 2026-01-01T10:00:20.5Z done",
    ]
    assert only_stderr.lines == ["[greet:stderr] oops"]


def test_tail_and_grep(cli, azbatch_default, logs_job):
    assert cli("logs", logs_job, "plain", "--tail", "2").lines == ["4", "5"]
    assert cli("logs", logs_job, "plain", "--tail", "0").out == ""
    assert cli("logs", logs_job, "plain", "--tail", "9").lines == ["1", "2", "3", "4", "5"]
    assert cli("logs", logs_job, "--tail", "1").lines == [
        "[greet] world",
        "[greet:stderr] oops",
        "[partial] no end",
        "[plain] 5",
        "[stamped] 2026-01-01T10:00:20.5Z done",
    ]
    assert cli("logs", logs_job, "--grep", r"^[24]$|step").lines == [
        "[plain] 2",
        "[plain] 4",
        "[stamped] 2026-01-01T10:00:05Z step one",
        "[stamped]   detail of step one",
        "[stamped] 2026-01-01 10:00:10,250 INFO step two",
    ]
    assert cli("logs", logs_job, "plain", "--grep", "[1-4]", "--tail", "2").lines == ["3", "4"]


def test_time_window_by_the_time_lines_start_with(cli, azbatch_default, logs_job):
    window = cli("logs", logs_job, "stamped", "--since", "2026-01-01T10:00:05Z", "--until", "2026-01-01T10:00:15")
    since = cli("logs", logs_job, "stamped", "--since", "2026-01-01T10:00:16Z")
    untimed = cli("logs", logs_job, "plain", "--since", "2026-01-01")

    assert window.code == 0, window.err
    assert window.lines == [
        "2026-01-01T10:00:05Z step one",
        "  detail of step one",
        "2026-01-01 10:00:10,250 INFO step two",
        "[2026-01-01T11:00:15+01:00] an hour ahead, so 10:00:15 UTC",
    ]
    assert since.lines == ["2026-01-01T10:00:20.5Z done"]
    assert (untimed.code, untimed.out) == (0, "")
    assert untimed.error == (
        "No line started with a time: --since/--until select lines by the ISO 8601 time they start with "
        "(as logging libraries write it)"
    )


def test_logs_errors(cli, azbatch_default, logs_job):
    bad_regex = cli("logs", logs_job, "--grep", "(unclosed")
    unknown_task = cli("logs", logs_job, "nope")
    unknown_job = cli("logs", "no-such-job")
    follow_until = cli("logs", logs_job, "--follow", "--until", "1h")

    assert (bad_regex.code, bad_regex.out) == (2, "")
    assert bad_regex.error == (
        "--grep '(unclosed' is not a valid regular expression: missing ), unterminated subpattern at position 0"
    )
    assert (unknown_task.code, unknown_task.error) == (1, "Batch job 'cli-logs' has no task 'nope'")
    assert (unknown_job.code, unknown_job.error) == (
        1,
        "Batch job 'no-such-job' does not exist in Batch account 'devbatchaccount1'",
    )
    assert (follow_until.code, follow_until.error) == (
        2,
        "--until cannot be used with --follow (followed output has no end to stop at)",
    )


def test_max_tasks_and_a_task_not_started(cli, azbatch_default, batch_client, logs_job, jobs_to_clean):
    batch_client.create_pool(pool_options("cli-no-nodes", nodes=0))
    create_job(batch_client, "cli-logs-waiting", "cli-no-nodes", [task("later", "echo never")], end_with_tasks=False)
    jobs_to_clean.append("cli-logs-waiting")

    first_two = cli("logs", logs_job, "--max-tasks", "2")
    waiting = cli("logs", "cli-logs-waiting", "later")

    assert first_two.lines == ["[greet] hello", "[greet] world", "[greet:stderr] oops", "[partial] no end"]
    assert first_two.error == "Showing the first 2 tasks of Batch job cli-logs by id (--max-tasks to see more)"
    every = cli("logs", "cli-logs-waiting")
    assert (waiting.code, waiting.out) == (1, "")
    assert waiting.error == (
        "Task 'later' of Batch job cli-logs-waiting has not started yet (active): no output so far (--follow to wait "
        "for it)"
    )
    assert (every.code, every.out) == (1, "")
    assert every.error == (
        "No task of Batch job cli-logs-waiting has started yet (1 active): no output so far (--follow to wait for it)"
    )


def test_logs_of_a_job_without_tasks_exits_non_zero(cli, azbatch_default, batch_client, shared_pool, jobs_to_clean):
    create_job(batch_client, "cli-logs-empty", shared_pool, [], end_with_tasks=False)
    jobs_to_clean.append("cli-logs-empty")

    result = cli("logs", "cli-logs-empty")

    assert (result.code, result.out) == (1, "")
    assert result.error == "Batch job cli-logs-empty has no tasks: no output to show"


# -- --follow --------------------------------------------------------------------------------------------
def _start_emitting(batch_client, shared_pool, job_id: str, count: int, pause: float) -> None:
    create_job(batch_client, job_id, shared_pool, [task("emit", f"{sys.executable} {EMIT} {count} {pause}")])

    def some_output() -> bool:
        files = {f.name: f for f in batch_client.list_task_files(job_id, "emit")}
        # A few lines at least (each "line N" is 7-9 bytes): more than a --tail 3 shows.
        return "stdout.txt" in files and int(files["stdout.txt"].properties.content_length) > 60

    wait_until(some_output, what="the task's first lines")


def _stdout_size(batch_client, job_id: str) -> int:
    return batch_client.get_task_file_properties(job_id, "emit", "stdout.txt").content_length


def test_follow_shows_every_line_of_a_running_task_exactly_once(cli, azbatch_default, batch_client, shared_pool):
    _start_emitting(batch_client, shared_pool, "cli-follow", 150, 0.02)
    size_at_start = _stdout_size(batch_client, "cli-follow")

    result = cli("logs", "cli-follow", "emit", "--follow", "--poll-interval", "0.2")

    assert result.code == 0, result.err
    assert result.lines == expected_stdout(150)
    # It followed a running task: most of the output was written after it started.
    assert batch_client.get_task("cli-follow", "emit").state == m.BatchTaskState.COMPLETED
    assert size_at_start < _stdout_size(batch_client, "cli-follow") / 2


def test_follow_every_task_with_tail_shows_a_suffix_once(cli, azbatch_default, batch_client, shared_pool):
    _start_emitting(batch_client, shared_pool, "cli-follow-tail", 150, 0.02)

    result = cli("logs", "cli-follow-tail", "--follow", "--tail", "3", "--poll-interval", "0.2")

    assert result.code == 0, result.err
    stdout = [line[len("[emit] ") :] for line in result.lines if line.startswith("[emit] ")]
    stderr = [line[len("[emit:stderr] ") :] for line in result.lines if line.startswith("[emit:stderr] ")]
    assert len(stdout) + len(stderr) == len(result.lines)
    # The last lines written before it started (at most 3), then every line after, each once.
    everything = expected_stdout(150)
    assert stdout == everything[len(everything) - len(stdout) :]
    assert len(everything) - 3 > len(everything) - len(stdout) > 0
    assert stderr == expected_stderr(150)[len(expected_stderr(150)) - len(stderr) :]


def test_follow_as_a_user_runs_it(airflow_cli, azbatch_default, batch_client, shared_pool):
    _start_emitting(batch_client, shared_pool, "cli-follow-process", 100, 0.06)

    result = airflow_cli("logs", "cli-follow-process", "emit", "--stderr", "-f", "--poll-interval", "0.3")

    assert result.code == 0, result.err
    assert result.lines == expected_stderr(100)


# -- a task whose node is gone -----------------------------------------------------------------------------
@pytest.mark.azurite
def test_logs_come_from_blob_once_the_node_is_gone(cli, azbatch_with_storage, batch_client):
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

    storage = AzureBatchHook().blob_storage("Uploaded task logs")
    storage.ensure_container("cli-logs")
    url = storage.write_url("cli-logs", timedelta(hours=1))

    def uploaded(task_id: str, command: str) -> m.BatchTaskCreateOptions:
        destination = m.OutputFileBlobContainerDestination(container_url=url, path=f"runs/cli-gone/{task_id}")
        upload = m.OutputFileUploadConfiguration(upload_condition=m.OutputFileUploadCondition.TASK_COMPLETION)
        output = m.OutputFile(
            file_pattern="../std*.txt",
            destination=m.OutputFileDestination(container=destination),
            upload_options=upload,
        )
        return task(task_id, command, output_files=[output])

    batch_client.create_pool(pool_options("cli-gone-pool", nodes=1))
    create_job(
        batch_client,
        "cli-gone",
        "cli-gone-pool",
        [uploaded("a", "echo from a; echo a-err >&2"), uploaded("b", "echo from b; printf 'b tail'")],
        metadata={"azbatch-logs": "cli-logs/runs"},
    )
    create_job(batch_client, "cli-gone-bare", "cli-gone-pool", [task("a", "echo lost")])
    wait_job_done(batch_client, "cli-gone")
    wait_job_done(batch_client, "cli-gone-bare")
    batch_client.begin_delete_pool("cli-gone-pool").result()

    one = cli("logs", "cli-gone", "a")
    every = cli("logs", "cli-gone")
    followed = cli("logs", "cli-gone", "--follow", "--poll-interval", "0.2")
    tail = cli("logs", "cli-gone", "b", "--tail", "1")
    lost = cli("logs", "cli-gone-bare", "a")

    assert (one.code, one.out) == (0, "from a\n"), one.err
    assert every.lines == ["[a] from a", "[a:stderr] a-err", "[b] from b", "[b] b tail"]
    assert followed.lines == every.lines
    assert tail.lines == ["b tail"]
    assert (lost.code, lost.out) == (1, "")
    assert lost.error == (
        "The stdout.txt of task 'a' is gone with its node, and Batch job cli-gone-bare uploaded no logs to Blob "
        "(the operator does with output_container)"
    )

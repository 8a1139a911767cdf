"""The one verdict on how a job ended (model/verdict.py), and each face's words for it: ``jobs list``
(cli/outcomes.py), job events (job_events/outcome.py), TorchX (torchx/states.py) and a task's outcome
(model/outcomes.py). Each row is a case one of the four former definitions decided; the faces map it as they did."""

from __future__ import annotations

import pytest

from airflow_provider_azbatch.cli.outcomes import job_outcome
from airflow_provider_azbatch.job_events.outcome import outcome_of
from airflow_provider_azbatch.model import verdict as v
from airflow_provider_azbatch.model.outcomes import TaskEnd, TaskOutcome, counts_of
from airflow_provider_azbatch.model.records import TERMINAL_JOB_STATES, TaskCounts


def c(active: int = 0, running: int = 0, succeeded: int = 0, failed: int = 0) -> TaskCounts:
    """Task counts as Batch gives them: completed = succeeded + failed."""
    return TaskCounts(active, running, succeeded + failed, succeeded, failed)


# (job state, terminate reason, task counts) -> the verdict ("outcome tasks ended_by started|idle", "-": not over),
# the word of jobs list ("-": it always has a state) and TorchX's state.
ROWS = [
    # Not over: running, blocked (nothing runs, tasks wait on a failed one), waiting.
    ("active", None, c(active=1), "waiting unfinished - idle", "waiting", "PENDING"),
    ("active", None, c(), "waiting none - idle", "waiting", "PENDING"),
    ("active", None, c(running=1), "running unfinished - started", "running", "RUNNING"),
    ("active", None, c(running=1, failed=1), "running failed - started", "running", "RUNNING"),
    ("active", None, c(active=2, failed=1), "blocked failed - started", "blocked", "RUNNING"),
    ("active", None, c(active=1, succeeded=1), "waiting unfinished - started", "waiting", "RUNNING"),
    ("enabling", None, c(running=1), "running unfinished - started", "running", "RUNNING"),
    # jobs list shows a disabled job as such, whatever its tasks did.
    ("disabled", None, c(active=1), "waiting unfinished - idle", "disabled", "PENDING"),
    ("disabling", None, c(succeeded=1), "succeeded succeeded tasks started", "disabled", "SUCCEEDED"),
    # Not ended, but every task did: over by its tasks.
    ("active", None, c(succeeded=2), "succeeded succeeded tasks started", "succeeded", "SUCCEEDED"),
    ("active", None, c(succeeded=1, failed=1), "failed failed tasks started", "failed", "FAILED"),
    # Ended with its tasks (jobs list calls an ended job without tasks succeeded).
    ("completed", "AllTasksComplete", c(succeeded=3), "succeeded succeeded tasks started", "succeeded", "SUCCEEDED"),
    ("completed", "AllTasksComplete", c(succeeded=2, failed=1), "failed failed tasks started", "failed", "FAILED"),
    ("completed", None, c(), "failed none tasks idle", "succeeded", "FAILED"),
    # A task's exit options (or fail_fast) ended it; TorchX's fail fast.
    ("completed", "TaskFailed", c(active=2, failed=1), "failed failed task_failed started", "failed", "FAILED"),
    ("completed", "TorchXReplicaFailed:0/1:3", c(failed=1), "failed failed task_failed started", "failed", "FAILED"),
    # A clock ended it: timed out with tasks undone; a task that failed first is the failure.
    ("completed", "MaxWallClockTimeExpiry", c(active=2), "timed_out unfinished timed_out idle", "failed", "FAILED"),
    (
        "completed",
        "AirflowExecutionTimeout",
        c(running=1),
        "timed_out unfinished timed_out started",
        "failed",
        "FAILED",
    ),
    (
        "completed",
        "MaxWallClockTimeExpiry",
        c(active=1, failed=1),
        "failed failed timed_out started",
        "failed",
        "FAILED",
    ),
    # Stopped on purpose: TorchX reads the cancel first; jobs list a failed task first, a cancel only with tasks
    # undone, and has never read torchx cancel's as one.
    ("completed", "UserTerminate", c(running=1), "cancelled unfinished cancelled started", "cancelled", "CANCELLED"),
    ("terminating", "AirflowTaskKilled", c(active=1), "cancelled unfinished cancelled idle", "cancelled", "CANCELLED"),
    ("terminating", "UserTerminate", c(running=1), "cancelled unfinished cancelled started", "cancelled", "CANCELLED"),
    ("completed", "TorchXCancel", c(active=1), "cancelled unfinished cancelled idle", "failed", "CANCELLED"),
    ("completed", "UserTerminate", c(active=1, failed=1), "cancelled failed cancelled started", "failed", "CANCELLED"),
    ("completed", "UserTerminate", c(succeeded=1), "cancelled succeeded cancelled started", "succeeded", "CANCELLED"),
    # The provider's other reasons: a failure, like any job that ended with tasks undone.
    ("completed", "PoolProblem", c(active=1), "failed unfinished terminated idle", "failed", "FAILED"),
    ("completed", "TasksBlockedByFailures", c(active=1, failed=1), "failed failed blocked started", "failed", "FAILED"),
    # Being deleted (jobs list: deleting): what it ended as; deleted while it ran, the deletion stopped it.
    ("deleting", "AllTasksComplete", c(succeeded=2), "succeeded succeeded tasks started", "deleting", "SUCCEEDED"),
    ("deleting", "AllTasksComplete", c(succeeded=1, failed=1), "failed failed tasks started", "deleting", "FAILED"),
    ("deleting", "MaxWallClockTimeExpiry", c(active=1), "timed_out unfinished timed_out idle", "deleting", "FAILED"),
    ("deleting", "TorchXCancel", c(succeeded=1), "cancelled succeeded cancelled started", "deleting", "CANCELLED"),
    ("deleting", None, c(running=1), "cancelled unfinished deleted started", "deleting", "CANCELLED"),
    ("deleting", None, c(succeeded=1), "succeeded succeeded tasks started", "deleting", "SUCCEEDED"),
    # Not known.
    (None, None, c(), "unknown none - idle", "-", "UNKNOWN"),
]


def _verdict(words: str) -> tuple[str, str, str | None, bool]:
    outcome, tasks, why, started = words.split()
    return outcome, tasks, None if why == "-" else why, started == "started"


@pytest.mark.parametrize(("state", "reason", "task_counts", "verdict", "cli", "torchx"), ROWS)
def test_the_verdict_and_the_words_of_jobs_list_and_torchx(state, reason, task_counts, verdict, cli, torchx):
    found = v.job_verdict(state, reason, task_counts)
    assert (found.outcome, found.tasks, found.ended_by, found.started) == _verdict(verdict)
    assert found.over == (found.ended_by is not None)
    assert found.reason == reason
    if cli != "-":
        assert job_outcome(state, task_counts, reason) == cli
    pytest.importorskip("torchx")
    from airflow_provider_azbatch.torchx.states import app_state

    assert app_state(state, reason, task_counts).name == torchx


def test_every_word_is_in_the_vocabulary():
    outcomes, tasks, whys, _ = zip(*(_verdict(row[3]) for row in ROWS), strict=True)
    assert set(outcomes) == set(v.JOB_OUTCOMES)
    assert set(tasks) == set(v.TASKS_ENDED)
    assert set(whys) - {None} == set(v.ENDED_BY)


def test_a_job_that_cannot_be_scheduled_is_blocked_until_it_ends():
    assert v.job_verdict("active", None, c(active=2), scheduling_error=True).outcome == "blocked"
    assert job_outcome("active", c(active=2), None, scheduling_error=True) == "blocked"
    assert job_outcome("active", c(succeeded=2), None, scheduling_error=True) == "blocked"
    assert job_outcome("completed", c(active=2), "UserTerminate", scheduling_error=True) == "cancelled"


@pytest.mark.parametrize(
    ("reason", "why"),
    [
        (None, "tasks"),
        ("", "tasks"),
        (v.ALL_TASKS_COMPLETE, "tasks"),
        (v.USER_TERMINATE, "cancelled"),
        (v.AIRFLOW_TASK_KILLED, "cancelled"),
        (v.TORCHX_CANCEL, "cancelled"),
        (v.MAX_WALL_CLOCK, "timed_out"),
        (v.AIRFLOW_EXECUTION_TIMEOUT, "timed_out"),
        (v.TASK_FAILED, "task_failed"),
        ("TorchXReplicaFailed:1/0:137", "task_failed"),
        (v.BLOCKED_BY_DEPENDENCIES, "blocked"),
        (v.BLOCKED_BY_PREPARATION, "blocked"),
        (v.POOL_PROBLEM, "terminated"),
        (v.SPOT_FALLBACK_FAILED, "terminated"),
        (v.AIRFLOW_DEFERRAL_ENDED, "terminated"),
        ("SomeoneElsesReason", "terminated"),
    ],
)
def test_why_a_job_ended_from_its_terminate_reason(reason, why):
    assert v.ended_by(reason) == why


def test_one_set_of_job_states_and_cancel_reasons():
    assert TERMINAL_JOB_STATES is v.ENDED_STATES
    assert {"UserTerminate", "AirflowTaskKilled", "TorchXCancel"} == v.CANCEL_REASONS
    assert set(v.RELEASED_STATES) < set(v.ENDED_STATES)
    torchx_states = pytest.importorskip("airflow_provider_azbatch.torchx.states")
    assert torchx_states.CANCEL_REASONS is v.CANCEL_REASONS
    assert torchx_states.ENDED_JOB_STATES is v.ENDED_STATES


@pytest.mark.parametrize(
    ("task_counts", "expected", "done"),
    [
        (c(), 1, False),  # no tasks yet
        (c(succeeded=1), 1, True),
        (c(succeeded=1, failed=1), 3, False),  # the submission adds a third
        (c(succeeded=2, running=1), 1, False),
        (c(active=1, failed=2), 1, False),
    ],
)
def test_tasks_done(task_counts, expected, done):
    assert v.tasks_done(task_counts, expected) is done


@pytest.mark.parametrize(
    ("tasks", "tally", "event"),
    [
        ([], "none", "failed"),
        ([TaskEnd("a", "completed", 0, "success")], "succeeded", "succeeded"),
        ([TaskEnd("a", "completed", 0, "success"), TaskEnd("b", "completed", 3, "failure")], "failed", "failed"),
        ([TaskEnd("a", "completed", 0, "success"), TaskEnd("b", "active")], "unfinished", "failed"),
        ([TaskEnd("a", "preparing"), TaskEnd("b", "running")], "unfinished", "failed"),
        ([TaskEnd("a", "")], "unfinished", "failed"),  # a state not known here has not finished
        ([TaskEnd("a", "completed")], "failed", "failed"),  # completed without succeeding
    ],
)
def test_job_events_read_the_verdict_on_the_tasks_alone(tasks, tally, event):
    assert v.tasks_ended(counts_of(tasks)) == tally
    assert outcome_of(tasks) == event


SATISFY_3 = {"exitCodes": [{"code": 3, "exitOptions": {"dependencyAction": "satisfy"}}]}
FAILED = {"state": "completed", "result": "failure"}


@pytest.mark.parametrize(
    ("fields", "outcome", "succeeded", "ended"),
    [
        ({"state": "completed", "result": "success", "exit_code": 0}, "succeeded", True, False),
        ({**FAILED, "exit_code": 1}, "failed", False, False),
        ({**FAILED, "failure_code": v.TASK_ENDED}, "ended", False, True),
        ({**FAILED, "exit_code": 3, "exit_conditions": SATISFY_3}, "accepted", False, False),
        ({**FAILED, "exit_code": 4, "exit_conditions": SATISFY_3}, "failed", False, False),
        ({**FAILED, "exit_code": 3, "exit_conditions": SATISFY_3, "failure_code": v.TASK_ENDED}, "ended", False, True),
        ({"state": "active", "blocked": True}, "blocked", False, False),
        ({"state": "active"}, "active", False, False),
        ({"state": "running"}, "running", False, False),
    ],
)
def test_how_a_task_ended(fields, outcome, succeeded, ended):
    task = TaskOutcome(id="t", **{"exit_code": None, "result": None, "retry_count": 0, **fields})
    assert task.outcome == outcome
    assert (task.succeeded, task.ended, task.accepted) == (succeeded, ended, outcome == "accepted")
    found = v.task_outcome(task.state, task.result, task.failure_code, accepted=task.accepted, blocked=task.blocked)
    assert found == outcome
    assert outcome in v.TASK_OUTCOMES or outcome == task.state

"""Task definitions as a DAG author writes them, and the SDK models a job submission turns into."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.batch import models as batch_models

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs.tasks import TASK_FIELDS, TaskSpec, parse_tasks
from airflow_provider_azbatch.submission.job import JobSubmission


def _task(**fields):
    return {"id": "t1", "command_line": "echo hi", **fields}


def test_parse_minimal():
    assert TaskSpec.parse(_task(), "tasks[0]") == TaskSpec(id="t1", command_line="echo hi")


def test_parse_every_field():
    spec = TaskSpec.parse(
        _task(
            environment={"A": "1", "B": 2, "C": 1.5},
            max_retries=-1,
            max_wall_clock=90,
            depends_on=["t0", "tx"],
            required_slots=2,
            display_name="First task",
        ),
        "tasks[0]",
    )
    assert spec == TaskSpec(
        id="t1",
        command_line="echo hi",
        environment={"A": "1", "B": "2", "C": "1.5"},
        max_retries=-1,
        max_wall_clock=timedelta(seconds=90),
        depends_on=("t0", "tx"),
        required_slots=2,
        display_name="First task",
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(timedelta(minutes=5), timedelta(minutes=5)), (1.5, timedelta(seconds=1.5)), (3600, timedelta(hours=1))],
)
def test_parse_wall_clock(value, expected):
    assert TaskSpec.parse(_task(max_wall_clock=value), "tasks[0]").max_wall_clock == expected


def test_a_task_spec_is_checked_like_a_mapping():
    assert TaskSpec.parse(TaskSpec(id="x", command_line="true"), "tasks[0]") == TaskSpec(id="x", command_line="true")


def test_task_fields():
    assert TASK_FIELDS == (
        "id",
        "command_line",
        "environment",
        "max_retries",
        "max_wall_clock",
        "depends_on",
        "required_slots",
        "display_name",
        "image",
        "container_run_options",
        "num_nodes",
        "coordination_command",
        "inputs",
        "outputs",
        "workspace",
        "run_as",
        "overrides",
        "exit_conditions",
        "skip_on_exit_code",
        "result_file",
    )


def test_command_gives_one_task():
    assert parse_tasks("python run.py", None) == [TaskSpec(id="main", command_line="python run.py")]
    assert parse_tasks("x", None, default_task_id="only") == [TaskSpec(id="only", command_line="x")]


def test_dependencies_match_ids_without_case_and_in_any_order():
    tasks = [{"id": "late", "command_line": "x", "depends_on": ["EARLY"]}, {"id": "early", "command_line": "x"}]
    specs = parse_tasks(None, tasks)
    assert [spec.id for spec in specs] == ["late", "early"]
    assert specs[0].depends_on == ("EARLY",)


def test_tasks_may_be_task_specs_and_any_sequence():
    specs = parse_tasks(None, (TaskSpec("a", "x"), _task(depends_on=["a"])))
    assert specs == [TaskSpec("a", "x"), TaskSpec("t1", "echo hi", depends_on=("a",))]


def test_fan_out_ids_and_commands():
    specs = parse_tasks(
        None, None, command_template="score --part {value}", parameters=list(range(12)), task_id_prefix="p"
    )
    assert [spec.id for spec in specs][:3] == ["p-00", "p-01", "p-02"]
    assert specs[11].command_line == "score --part 11"
    mapped = parse_tasks(None, None, command_template="run {name} {n}", parameters=[{"name": "a", "n": 1}])
    assert mapped == [TaskSpec("task-0", "run a 1")]


# -- SDK models --------------------------------------------------------------------------------------


def _submission(**overrides) -> JobSubmission:
    fields = {
        "job_id": "job-1",
        "pool_id": "pool-1",
        "tasks": parse_tasks(
            None,
            [
                {"id": "a", "command_line": "echo a", "max_retries": 1},
                {"id": "b", "command_line": "echo b", "depends_on": ["a"], "max_wall_clock": 30},
            ],
        ),
    }
    fields.update(overrides)
    return JobSubmission(**fields)


def test_task_options_every_field():
    spec = TaskSpec(
        id="t1",
        command_line="echo $A",
        environment={"A": "1", "B": "two"},
        max_retries=0,
        max_wall_clock=timedelta(seconds=90),
        depends_on=("t0",),
        required_slots=2,
        display_name="First",
    )
    (options,) = _submission(tasks=[spec], default_retries=3, default_wall_clock=timedelta(hours=1)).task_options()
    assert options.as_dict() == {
        "id": "t1",
        "commandLine": "/bin/sh -c 'echo $A'",
        "displayName": "First",
        "environmentSettings": [{"name": "A", "value": "1"}, {"name": "B", "value": "two"}],
        "constraints": {"maxTaskRetryCount": 0, "maxWallClockTime": "PT01M30S"},
        "dependsOn": {"taskIds": ["t0"]},
        "requiredSlots": 2,
    }


@pytest.mark.parametrize(
    ("retries", "wall_clock", "constraints"),
    [
        (None, None, None),
        (3, None, {"maxTaskRetryCount": 3}),
        (None, timedelta(hours=1), {"maxWallClockTime": "PT01H00M00S"}),
        (-1, timedelta(days=2), {"maxTaskRetryCount": -1, "maxWallClockTime": "P2D"}),
    ],
)
def test_task_options_defaults(retries, wall_clock, constraints):
    (options,) = _submission(
        tasks=[TaskSpec("t1", "x")], default_retries=retries, default_wall_clock=wall_clock
    ).task_options()
    expected = {"id": "t1", "commandLine": "/bin/sh -c x"}
    if constraints:
        expected["constraints"] = constraints
    assert options.as_dict() == expected


def test_multi_node_task_options():
    (options,) = _submission(tasks=[TaskSpec("m", "torchrun x", num_nodes=2)]).task_options()
    assert options.as_dict()["commandLine"] == "/bin/sh -c 'torchrun x'"
    assert options.as_dict()["multiInstanceSettings"] == {
        "numberOfInstances": 2,
        "coordinationCommandLine": "/bin/sh -c true",
    }


def test_job_options_minimal():
    options = _submission(tasks=[TaskSpec("a", "x")]).job_options()
    assert isinstance(options, batch_models.BatchJobCreateOptions)
    assert options.as_dict() == {"id": "job-1", "poolInfo": {"poolId": "pool-1"}, "onAllTasksComplete": "noaction"}


def test_job_options_every_field():
    options = _submission(
        environment={"STAGE": "prod"},
        metadata={"airflow_dag_id": "d", "airflow_run_id": "r"},
        job_max_wall_clock=timedelta(hours=6),
        display_name="d.t",
        max_parallel_tasks=4,
    ).job_options()
    assert options.as_dict() == {
        "id": "job-1",
        "displayName": "d.t",
        "poolInfo": {"poolId": "pool-1"},
        "usesTaskDependencies": True,
        "commonEnvironmentSettings": [{"name": "STAGE", "value": "prod"}],
        "metadata": [{"name": "airflow_dag_id", "value": "d"}, {"name": "airflow_run_id", "value": "r"}],
        "constraints": {"maxWallClockTime": "PT06H00M00S"},
        "maxParallelTasks": 4,
        "onAllTasksComplete": "noaction",
    }


def test_task_options_apply_the_job_defaults():
    submission = _submission(default_retries=4, default_wall_clock=timedelta(minutes=10))
    assert [options.as_dict() for options in submission.task_options()] == [
        {
            "id": "a",
            "commandLine": "/bin/sh -c 'echo a'",
            "constraints": {"maxTaskRetryCount": 1, "maxWallClockTime": "PT10M00S"},
        },
        {
            "id": "b",
            "commandLine": "/bin/sh -c 'echo b'",
            "constraints": {"maxTaskRetryCount": 4, "maxWallClockTime": "PT30S"},
            "dependsOn": {"taskIds": ["a"]},
        },
    ]


def test_command_lines_are_handed_to_a_shell_and_stay_within_the_node_limit():
    # The service runs a command line without a shell; the provider's commands are shell commands.
    (options,) = _submission(tasks=[TaskSpec("q", "echo 'it''s' | wc -c; exit $?")]).task_options()
    assert options.command_line == "/bin/sh -c 'echo '\"'\"'it'\"'\"''\"'\"'s'\"'\"' | wc -c; exit $?'"
    quoted = "'" * 40000  # every quote takes five characters once quoted for the shell
    with pytest.raises(AzureBatchValidationError) as info:
        _submission(tasks=[TaskSpec("q", f"echo {quoted}")]).task_options()
    assert str(info.value).startswith("task 'q' command_line is ")
    assert "bytes long as sent (with its shell and workspace set-up); a node runs at most 131071 bytes" in str(
        info.value
    )


def test_a_task_runs_as_who_it_says_with_its_overrides_checked():
    from airflow_provider_azbatch.specs.identity import RunAs

    spec = TaskSpec.parse(
        _task(run_as={"elevation": "admin", "scope": "task"}, overrides={"constraints": {"retentionTime": "PT1H"}}),
        "tasks[0]",
    )
    assert spec.run_as == RunAs("admin", "task")
    assert spec.overrides == {"constraints": {"retentionTime": "PT1H"}}
    with pytest.raises(AzureBatchValidationError) as info:
        TaskSpec.parse(_task(overrides={"constraints": {"retention": "PT1H"}}), "tasks[3]")
    assert str(info.value) == (
        "tasks[3].overrides.constraints.retention is not a field of BatchTaskConstraints: did you mean 'retentionTime'?"
    )


def test_a_tasks_container_run_options_follow_the_jobs():
    from airflow_provider_azbatch.submission.job import TaskExtras

    (spec,) = parse_tasks(
        None, [{"id": "t", "command_line": "true", "image": "img:1", "container_run_options": "--ulimit nofile=1"}]
    )
    submission = JobSubmission(
        job_id="j", pool_id="p", tasks=[spec], extras=TaskExtras(container_run_options="--shm-size=8g")
    )
    (options,) = submission.task_options()
    assert options.container_settings.container_run_options == "--shm-size=8g --ulimit nofile=1"

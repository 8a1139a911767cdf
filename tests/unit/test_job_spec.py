"""Task definitions: every validation message, and the SDK models a job submission turns into."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.batch import models as batch_models

from airflow_provider_azbatch.utils.job_spec import (
    TASK_FIELDS,
    JobSubmission,
    TaskSpec,
    TaskSpecError,
    parse_tasks,
)

KNOWN = (
    "id, command_line, environment, max_retries, max_wall_clock, depends_on, required_slots, display_name, image, "
    "num_nodes, coordination_command, inputs, outputs"
)


def _parse_error(value) -> str:
    with pytest.raises(TaskSpecError) as info:
        TaskSpec.parse(value, "tasks[3]")
    assert isinstance(info.value, ValueError)
    return str(info.value)


def _tasks_error(command, tasks) -> str:
    with pytest.raises(TaskSpecError) as info:
        parse_tasks(command, tasks)
    return str(info.value)


def _task(**fields):
    return {"id": "t1", "command_line": "echo hi", **fields}


# -- TaskSpec.parse --------------------------------------------------------------------------------


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


def test_parse_returns_a_task_spec_as_is():
    spec = TaskSpec(id="x", command_line="true")

    assert TaskSpec.parse(spec, "tasks[0]") is spec


def test_task_fields():
    assert ", ".join(TASK_FIELDS) == KNOWN


@pytest.mark.parametrize(("value", "kind"), [(["t1", "echo"], "list"), ("echo hi", "str"), (None, "NoneType")])
def test_parse_not_a_mapping(value, kind):
    assert _parse_error(value) == f"tasks[3] must be a mapping with at least id and command_line, got {kind}"


def test_parse_unknown_fields():
    assert _parse_error(_task(cmd="x", Foo=1, retries=2)) == (
        f"tasks[3] has unknown field(s) Foo, cmd, retries; known: {KNOWN}"
    )


@pytest.mark.parametrize("task_id", [None, "", "has space", "dot.ted", "x" * 65, 5, "é"])
def test_parse_bad_id(task_id):
    value = {"command_line": "echo"} if task_id is None else {"id": task_id, "command_line": "echo"}

    assert _parse_error(value) == (
        f"tasks[3].id {task_id!r} is not a valid Batch task id: use at most 64 letters, digits, '-' or '_'"
    )


def test_parse_rejects_a_trailing_newline_in_the_id():
    with pytest.raises(TaskSpecError):
        TaskSpec.parse({"id": "t1\n", "command_line": "echo"}, "tasks[3]")


def test_parse_id_of_64_characters():
    assert TaskSpec.parse({"id": "A_-9" * 16, "command_line": "echo"}, "tasks[0]").id == "A_-9" * 16


@pytest.mark.parametrize("command", [None, "", "   \n", 5, ["echo", "hi"]])
def test_parse_bad_command_line(command):
    value = {"id": "t1"} if command is None else {"id": "t1", "command_line": command}

    assert _parse_error(value) == "tasks[3].command_line is missing: give the shell command the task runs"


@pytest.mark.parametrize("depends", ["t0", ["t0", 1], [None]])
def test_parse_bad_depends_on(depends):
    assert _parse_error(_task(depends_on=depends)) == (
        f"tasks[3].depends_on must be a list of task ids, got {depends!r}"
    )


def test_parse_non_iterable_depends_on():
    assert _parse_error(_task(depends_on=5)) == "tasks[3].depends_on must be a list of task ids, got 5"


@pytest.mark.parametrize("depends", [None, [], ()])
def test_parse_empty_depends_on(depends):
    assert TaskSpec.parse(_task(depends_on=depends), "tasks[0]").depends_on == ()


@pytest.mark.parametrize("slots", [0, -1, True, "2", 1.5])
def test_parse_bad_required_slots(slots):
    assert _parse_error(_task(required_slots=slots)) == (
        f"tasks[3].required_slots must be an integer >= 1, got {slots!r}"
    )


@pytest.mark.parametrize(("env", "kind"), [(["A=1"], "list"), ("A=1", "str"), (5, "int")])
def test_parse_environment_not_a_mapping(env, kind):
    assert _parse_error(_task(environment=env)) == (
        f"tasks[3].environment must be a mapping of names to strings, got {kind}"
    )


@pytest.mark.parametrize("name", ["", 1, None])
def test_parse_environment_bad_name(name):
    assert _parse_error(_task(environment={name: "v"})) == (
        f"tasks[3].environment has an invalid variable name {name!r}"
    )


@pytest.mark.parametrize(("value", "kind"), [(None, "NoneType"), (True, "bool"), (["a"], "list"), ({"a": 1}, "dict")])
def test_parse_environment_bad_value(value, kind):
    assert _parse_error(_task(environment={"NAME": value})) == (
        f"tasks[3].environment['NAME'] must be a string, got {kind}"
    )


@pytest.mark.parametrize("retries", [-2, True, "3", 1.5])
def test_parse_bad_max_retries(retries):
    assert _parse_error(_task(max_retries=retries)) == (
        f"tasks[3].max_retries must be an integer >= -1 (-1 retries without limit), got {retries!r}"
    )


@pytest.mark.parametrize("value", ["1h", True, [60]])
def test_parse_wall_clock_of_the_wrong_type(value):
    assert _parse_error(_task(max_wall_clock=value)) == (
        f"tasks[3].max_wall_clock must be a timedelta or a number of seconds, got {value!r}"
    )


@pytest.mark.parametrize("value", [0, -5, 0.0, timedelta(0), timedelta(seconds=-1)])
def test_parse_wall_clock_not_positive(value):
    assert _parse_error(_task(max_wall_clock=value)) == f"tasks[3].max_wall_clock must be positive, got {value!r}"


# -- parse_tasks -----------------------------------------------------------------------------------


def test_command_gives_one_task():
    assert parse_tasks("python run.py", None) == [TaskSpec(id="main", command_line="python run.py")]
    assert parse_tasks("x", [], default_task_id="only") == [TaskSpec(id="only", command_line="x")]


def test_command_and_tasks():
    assert _tasks_error("echo", [_task()]) == "give one of command, tasks or command_template, not command and tasks"


@pytest.mark.parametrize("command", ["", "  ", 7])
def test_empty_command(command):
    assert _tasks_error(command, None) == "command is empty: give the shell command the task runs"


@pytest.mark.parametrize("tasks", [None, [], ()])
def test_nothing_to_run(tasks):
    assert _tasks_error(None, tasks) == (
        "nothing to run: give command (one task), tasks (a list of task definitions) or command_template with "
        "parameters (one task per parameter)"
    )


@pytest.mark.parametrize(("tasks", "kind"), [("echo", "str"), (b"echo", "bytes"), (_task(), "dict")])
def test_tasks_not_a_list(tasks, kind):
    assert _tasks_error(None, tasks) == f"tasks must be a list of task definitions, got {kind}"


def test_tasks_errors_name_the_index():
    assert _tasks_error(None, [_task(), {"id": "t2"}]) == (
        "tasks[1].command_line is missing: give the shell command the task runs"
    )


@pytest.mark.parametrize("second", ["t1", "T1"])
def test_duplicate_ids_ignore_case(second):
    tasks = [_task(), {"id": "t2", "command_line": "x"}, {"id": second, "command_line": "x"}]

    assert _tasks_error(None, tasks) == f"tasks[2].id {second!r} repeats tasks[0].id: task ids must be unique"


def test_unknown_dependency():
    tasks = [_task(), {"id": "t2", "command_line": "x", "depends_on": ["t1", "t9"]}]

    assert _tasks_error(None, tasks) == "tasks[1].depends_on names 't9', which is not a task of this job"


def test_dependencies_match_ids_without_case_and_in_any_order():
    tasks = [
        {"id": "late", "command_line": "x", "depends_on": ["EARLY"]},
        {"id": "early", "command_line": "x"},
    ]

    specs = parse_tasks(None, tasks)

    assert [spec.id for spec in specs] == ["late", "early"]
    assert specs[0].depends_on == ("EARLY",)


def test_tasks_may_be_task_specs_and_any_sequence():
    specs = parse_tasks(None, (TaskSpec("a", "x"), _task(depends_on=["a"])))

    assert specs == [TaskSpec("a", "x"), TaskSpec("t1", "echo hi", depends_on=("a",))]


# -- SDK models ------------------------------------------------------------------------------------


def test_task_to_sdk_minimal():
    options = TaskSpec("t1", "echo hi").to_sdk(default_retries=None, default_wall_clock=None)

    assert isinstance(options, batch_models.BatchTaskCreateOptions)
    assert options.as_dict() == {"id": "t1", "commandLine": "echo hi"}


def test_task_to_sdk_every_field():
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

    options = spec.to_sdk(default_retries=3, default_wall_clock=timedelta(hours=1))

    assert options.as_dict() == {
        "id": "t1",
        "commandLine": "echo $A",
        "displayName": "First",
        "environmentSettings": [{"name": "A", "value": "1"}, {"name": "B", "value": "two"}],
        "constraints": {"maxTaskRetryCount": 0, "maxWallClockTime": "PT01M30S"},
        "dependsOn": {"taskIds": ["t0"]},
        "requiredSlots": 2,
    }
    assert options.constraints.max_wall_clock_time == timedelta(seconds=90)


@pytest.mark.parametrize(
    ("retries", "wall_clock", "constraints"),
    [
        (3, None, {"maxTaskRetryCount": 3}),
        (None, timedelta(hours=1), {"maxWallClockTime": "PT01H00M00S"}),
        (-1, timedelta(days=2), {"maxTaskRetryCount": -1, "maxWallClockTime": "P2D"}),
    ],
)
def test_task_to_sdk_defaults(retries, wall_clock, constraints):
    options = TaskSpec("t1", "x").to_sdk(default_retries=retries, default_wall_clock=wall_clock)

    assert options.as_dict() == {"id": "t1", "commandLine": "x", "constraints": constraints}


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


def test_job_options_minimal():
    options = _submission(tasks=[TaskSpec("a", "x")]).job_options()

    assert isinstance(options, batch_models.BatchJobCreateOptions)
    assert options.as_dict() == {"id": "job-1", "poolInfo": {"poolId": "pool-1"}, "onAllTasksComplete": "noaction"}
    assert options.all_tasks_complete_mode == batch_models.BatchAllTasksCompleteMode.NO_ACTION


def test_job_options_every_field():
    options = _submission(
        environment={"STAGE": "prod"},
        metadata={"airflow_dag_id": "d", "airflow_run_id": "r"},
        job_max_wall_clock=timedelta(hours=6),
        display_name="d.t",
    ).job_options()

    assert options.as_dict() == {
        "id": "job-1",
        "displayName": "d.t",
        "poolInfo": {"poolId": "pool-1"},
        "usesTaskDependencies": True,
        "commonEnvironmentSettings": [{"name": "STAGE", "value": "prod"}],
        "metadata": [{"name": "airflow_dag_id", "value": "d"}, {"name": "airflow_run_id", "value": "r"}],
        "constraints": {"maxWallClockTime": "PT06H00M00S"},
        "onAllTasksComplete": "noaction",
    }


def test_task_options_apply_the_job_defaults():
    submission = _submission(default_retries=4, default_wall_clock=timedelta(minutes=10))

    assert [options.as_dict() for options in submission.task_options()] == [
        {"id": "a", "commandLine": "echo a", "constraints": {"maxTaskRetryCount": 1, "maxWallClockTime": "PT10M00S"}},
        {
            "id": "b",
            "commandLine": "echo b",
            "constraints": {"maxTaskRetryCount": 4, "maxWallClockTime": "PT30S"},
            "dependsOn": {"taskIds": ["a"]},
        },
    ]

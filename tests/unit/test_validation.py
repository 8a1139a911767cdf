"""One validation layer: every bad value names its field and the rule it breaks, type errors included."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.blob_io import parse_inputs, parse_outputs
from airflow_provider_azbatch.specs.tasks import parse_tasks


def _task(**fields):
    return {"id": "t1", "command_line": "echo hi", **fields}


def _tasks(*tasks):
    return lambda: parse_tasks(None, list(tasks))


CASES = [
    # what to run
    (lambda: parse_tasks("echo", [_task()]), "tasks", "cannot be given with command"),
    (lambda: parse_tasks("", None), "command", "is empty"),
    (lambda: parse_tasks(7, None), "command", "must be a string, got int 7"),
    (lambda: parse_tasks(None, None), "command", "is missing: give command (one task)"),
    (lambda: parse_tasks(None, []), "tasks", "is empty: give at least one task"),
    (lambda: parse_tasks(None, "echo"), "tasks", "must be a list of task definitions, got str"),
    (lambda: parse_tasks(None, {"id": "x"}), "tasks", "must be a list of task definitions, got dict"),
    (lambda: parse_tasks("x", None, num_nodes=0), "num_nodes", "must be >= 1, got 0"),
    (lambda: parse_tasks("x", None, coordination_command="setup"), "coordination_command", "needs num_nodes > 1"),
    (lambda: parse_tasks(None, [_task()], num_nodes=2), "num_nodes", "applies to command"),
    (lambda: parse_tasks("x" * (validation.MAX_COMMAND_BYTES + 1), None), "command", "bytes long; a node runs at most"),
    # task fields
    (_tasks(["t1", "echo"]), "tasks[0]", "must be a mapping with at least id and command_line, got list"),
    (_tasks(_task(cmd="x")), "tasks[0]", "has unknown field(s) cmd; known: id, command_line"),
    (_tasks(_task(id="")), "tasks[0].id", "'' is not a valid Batch task id"),
    (_tasks(_task(id="a b")), "tasks[0].id", "'a b' is not a valid Batch task id: use 1 to 64 letters"),
    (_tasks(_task(id="x" * 65)), "tasks[0].id", "is not a valid Batch task id"),
    (_tasks(_task(id="job\n")), "tasks[0].id", "is not a valid Batch task id"),
    (_tasks(_task(id=5)), "tasks[0].id", "must be a string (Batch task id), got int 5"),
    (_tasks({"id": "t2"}), "tasks[0].command_line", "is missing"),
    (_tasks(_task(command_line="  ")), "tasks[0].command_line", "is empty"),
    (_tasks(_task(command_line="a\x00b")), "tasks[0].command_line", "contains a NUL character"),
    (_tasks(_task(command_line=["echo"])), "tasks[0].command_line", "must be a string, got list"),
    (_tasks(_task(environment=["A=1"])), "tasks[0].environment", "must be a mapping of variable names to strings"),
    (
        _tasks(_task(environment={"A=B": "1"})),
        "tasks[0].environment['A=B']",
        "is not a valid environment variable name",
    ),
    (_tasks(_task(environment={"": "1"})), "tasks[0].environment['']", "is not a valid environment variable name"),
    (_tasks(_task(environment={"1A": "1"})), "tasks[0].environment['1A']", "is not a valid environment variable"),
    (_tasks(_task(environment={"A": {"x": 1}})), "tasks[0].environment['A']", "must be a string, got dict"),
    (_tasks(_task(environment={"A": None})), "tasks[0].environment['A']", "must be a string, got NoneType"),
    (_tasks(_task(environment={"A": True})), "tasks[0].environment['A']", "must be a string, got bool"),
    (_tasks(_task(environment={"A": math.nan})), "tasks[0].environment['A']", "must be a string, got nan"),
    (_tasks(_task(max_retries=-2)), "tasks[0].max_retries", "must be >= -1 (-1 retries without limit), got -2"),
    (
        _tasks(_task(max_retries="3")),
        "tasks[0].max_retries",
        "must be a whole number (-1 retries without limit), got str",
    ),
    (_tasks(_task(max_retries=1.5)), "tasks[0].max_retries", "must be a whole number"),
    (_tasks(_task(max_wall_clock=0)), "tasks[0].max_wall_clock", "must be a positive duration, got 0"),
    (_tasks(_task(max_wall_clock=-5)), "tasks[0].max_wall_clock", "must be a positive duration"),
    (_tasks(_task(max_wall_clock=math.nan)), "tasks[0].max_wall_clock", "must be a positive duration, got nan"),
    (_tasks(_task(max_wall_clock=math.inf)), "tasks[0].max_wall_clock", "must be a positive duration, got inf"),
    (_tasks(_task(max_wall_clock="1h")), "tasks[0].max_wall_clock", "must be a timedelta or a number of seconds"),
    (_tasks(_task(max_wall_clock=timedelta(days=181))), "tasks[0].max_wall_clock", "must be at most 180 days"),
    (_tasks(_task(depends_on="t0")), "tasks[0].depends_on", "must be a list of strings, got str"),
    (_tasks(_task(depends_on=[1])), "tasks[0].depends_on[0]", "must be a string, got int"),
    (_tasks(_task(depends_on=["t1"])), "tasks[0].depends_on", "names the task itself ('t1')"),
    (_tasks(_task(depends_on=["T1"])), "tasks[0].depends_on", "names the task itself"),
    (_tasks(_task(depends_on=["nope"])), "tasks[0].depends_on", "names 'nope', which is not a task of this job"),
    (
        _tasks(
            {"id": "a", "command_line": "x", "depends_on": ["b"]}, {"id": "b", "command_line": "x", "depends_on": ["a"]}
        ),
        "tasks[1].depends_on",
        "makes a cycle (a -> b -> a): these tasks would wait for each other forever",
    ),
    (
        _tasks(
            {"id": "a", "command_line": "x", "depends_on": ["c"]},
            {"id": "b", "command_line": "x", "depends_on": ["a"]},
            {"id": "c", "command_line": "x", "depends_on": ["b"]},
        ),
        "tasks[",
        "makes a cycle (",
    ),
    (_tasks(_task(), _task()), "tasks[1].id", "'t1' repeats tasks[0].id: task ids must be unique"),
    (_tasks(_task(), _task(id="T1")), "tasks[1].id", "repeats tasks[0].id"),
    (_tasks(_task(required_slots=0)), "tasks[0].required_slots", "must be between 1 and 256, got 0"),
    (_tasks(_task(required_slots=257)), "tasks[0].required_slots", "must be between 1 and 256"),
    (_tasks(_task(required_slots="2")), "tasks[0].required_slots", "must be a whole number, got str"),
    (
        _tasks(_task(display_name="x" * 1025)),
        "tasks[0].display_name",
        "is 1025 characters long; the Batch service allows at most 1024",
    ),
    (_tasks(_task(image="my image")), "tasks[0].image", "is not a valid image reference: it has whitespace"),
    (_tasks(_task(image=3)), "tasks[0].image", "must be a string"),
    (_tasks(_task(num_nodes=True)), "tasks[0].num_nodes", "must be a whole number, got bool"),
    (_tasks(_task(coordination_command="x")), "tasks[0].coordination_command", "needs num_nodes > 1"),
    # fan-out
    (
        lambda: parse_tasks(None, None, command_template="x {value}", parameters=[]),
        "parameters",
        "must be a non-empty list",
    ),
    (
        lambda: parse_tasks(None, None, command_template="x {name}", parameters=[{"n": 1}]),
        "parameters[0]",
        "has no name",
    ),
    (lambda: parse_tasks(None, None, command_template="x", parameters="abc"), "parameters", "must be a non-empty list"),
    (
        lambda: parse_tasks(None, None, command_template="x", parameters=[1], task_id_prefix="a b"),
        "task_id_prefix",
        "is not a valid task id prefix",
    ),
    (lambda: parse_tasks(None, None, parameters=[1]), "parameters", "only go with command_template"),
    # Blob inputs and outputs
    (lambda: parse_inputs({"container": "c"}, "inputs"), "inputs", "must be a list of inputs, got dict"),
    (lambda: parse_inputs([{"container": "data", "path": "../up"}], "inputs"), "inputs[0].path", "goes up with '..'"),
    (lambda: parse_inputs([{"container": "data", "path": "/abs"}], "inputs"), "inputs[0].path", "is absolute"),
    (
        lambda: parse_inputs([{"container": "data", "path": "a/../../b"}], "inputs"),
        "inputs[0].path",
        "goes up with '..'",
    ),
    (
        lambda: parse_inputs([{"container": "Bad_Name"}], "inputs"),
        "inputs[0].container",
        "is not a valid Blob container name",
    ),
    (lambda: parse_inputs([{"url": "https://x/y"}], "inputs"), "inputs[0].path", "is missing: name the file"),
    (lambda: parse_inputs([{"url": "ftp://x/y", "path": "y"}], "inputs"), "inputs[0].url", "must be an http(s) URL"),
    (
        lambda: parse_inputs([{"container": "data", "url": "https://x"}], "inputs"),
        "inputs[0]",
        "needs either container",
    ),
    (
        lambda: parse_inputs([{"container": "data", "file_mode": "rwx"}], "inputs"),
        "inputs[0].file_mode",
        "must be an octal mode",
    ),
    (lambda: parse_outputs([{"pattern": "*", "path": "../x"}], "outputs"), "outputs[0].path", "goes up with '..'"),
    (
        lambda: parse_outputs([{"pattern": "*", "upload": "always"}], "outputs"),
        "outputs[0].upload",
        "must be success, failure or completion",
    ),
    (lambda: parse_outputs([{"path": "x"}], "outputs"), "outputs[0].pattern", "is missing"),
    # values the operator checks
    (lambda: validation.number("5", "poll_interval"), "poll_interval", "must be a number, got str '5'"),
    (lambda: validation.number(math.nan, "poll_interval"), "poll_interval", "must be a finite number, got nan"),
    (lambda: validation.number(math.inf, "poll_interval"), "poll_interval", "must be a finite number, got inf"),
    (lambda: validation.number(0, "poll_interval"), "poll_interval", "must be greater than 0"),
    (lambda: validation.metadata({"k": 1}, "metadata"), "metadata['k']", "must be a string, got int"),
    (lambda: validation.metadata(["k"], "metadata"), "metadata", "must be a mapping of names to strings"),
    (lambda: validation.batch_id("job id", "job_id", "Batch job id"), "job_id", "is not a valid Batch job id"),
]


@pytest.mark.parametrize(("make", "field", "problem"), CASES)
def test_bad_input_names_its_field_and_rule(make, field, problem):
    with pytest.raises(AzureBatchValidationError) as info:
        make()
    error = info.value
    assert error.field.startswith(field), str(error)
    assert problem in str(error)
    assert str(error).startswith(error.field)


def test_enough_cases():
    assert len(CASES) >= 60


def test_dependency_graph_accepts_a_diamond():
    validation.dependency_graph({"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}, {t: t for t in "abcd"})


def test_relative_paths_that_are_fine():
    assert validation.relative_path("data/train", "p") == "data/train"
    assert validation.relative_path("a..b/c", "p") == "a..b/c"


@pytest.mark.parametrize(
    "name", ["azbatch-logs", "azbatch-workspaces", "airflow_dag_id", "airflow_task_id", "airflow_run_id"]
)
def test_metadata_the_operator_sets_itself_is_reserved(name):
    from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

    with pytest.raises(AzureBatchValidationError) as info:
        AzureBatchJobOperator(task_id="t", pool_id="p", command="true", metadata={name: "mine"})

    assert str(info.value) == f"metadata[{name!r}] is set by the operator itself: use another name"

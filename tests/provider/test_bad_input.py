"""Bad input is refused before anything is submitted, with an error that names the field and the rule.

Operator parameters that are not templated are checked when the DAG is defined; everything else when the
task runs, before the first request that creates anything. Each case asserts its message, and the local
Batch service must not have received a single create request by the end.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta

import pytest
from airflow.sdk import DAG

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.submission import ContainerOptions, FanOut
from tests.airflow_helpers import azbatch_connection_json, run_dag

START = datetime(2026, 1, 1)
CREATES = ("Jobs_CreateJob", "Tasks_CreateTask", "Tasks_CreateTaskCollection", "Pools_CreatePool")


def _task(**fields):
    return {"id": "t1", "command_line": "echo hi", **fields}


# (operator parameters, the error's field, words of its message) - refused when the DAG is defined.
AT_DEFINITION = [
    (
        {"pool_id": "shared", "batch_pool": BatchPool.existing("shared")},
        "pool_id",
        "or batch_pool must be given, not both",
    ),
    ({"pool_id": None}, "pool_id", "or batch_pool must be given"),
    ({"batch_pool": "shared"}, "batch_pool", "must be a BatchPool (existing, shared or auto), got str"),
    ({"poll_interval": math.nan}, "poll_interval", "must be a finite number, got nan"),
    ({"poll_interval": math.inf}, "poll_interval", "must be a finite number, got inf"),
    ({"poll_interval": "5"}, "poll_interval", "must be a number, got str '5'"),
    ({"poll_interval": 0}, "poll_interval", "must be greater than 0, got 0"),
    ({"poll_interval": -1}, "poll_interval", "must be greater than 0"),
    ({"max_task_retries": -3}, "max_task_retries", "must be >= -1 (-1 retries without limit), got -3"),
    ({"max_task_retries": "2"}, "max_task_retries", "must be a whole number (-1 retries without limit), got str"),
    ({"max_wall_clock": math.nan}, "max_wall_clock", "must be a positive duration, got nan"),
    ({"max_wall_clock": -1}, "max_wall_clock", "must be a positive duration"),
    ({"job_max_wall_clock": "1h"}, "job_max_wall_clock", "must be a timedelta or a number of seconds, got str"),
    ({"job_max_wall_clock": timedelta(days=400)}, "job_max_wall_clock", "must be at most 180 days"),
    ({"max_parallel_tasks": 0}, "max_parallel_tasks", "must be >= 1, got 0"),
    ({"max_parallel_tasks": True}, "max_parallel_tasks", "must be a whole number, got bool"),
    ({"num_nodes": 0}, "num_nodes", "must be >= 1, got 0"),
    ({"max_streamed_tasks": -1}, "max_streamed_tasks", "must be between 0 and 1000, got -1"),
    ({"failure_tail_lines": 1.5}, "failure_tail_lines", "must be a whole number, got float"),
    ({"max_outage": math.inf}, "max_outage", "must be a finite number, got inf"),
    ({"on_finish_action": "delete"}, "on_finish_action", "must be one of keep_job, delete_job, delete_succeeded_job"),
    ({"container_working_directory": "root"}, "container_working_directory", "must be 'task' or 'image', got 'root'"),
    ({"image": "a", "containers": ContainerOptions(image="b")}, "image", "is also set in containers"),
    ({"fan_out": FanOut("x {value}", [1]), "command_template": "y"}, "command_template", "is also set in fan_out"),
    ({"parameters": [1, 2]}, "parameters", "only go with command_template"),
    ({"deferrable": "yes"}, "deferrable", "must be True or False, got 'yes'"),
    # A new user's typos: each named, with what was meant.
    (
        {"max_wall_clok": 60},
        "max_wall_clok",
        "is not a parameter of AzureBatchJobOperator: did you mean 'max_wall_clock'?",
    ),
    ({"retires": 2}, "retires", "is not a parameter of AzureBatchJobOperator: did you mean 'retries'?"),
    ({"zzz_unheard_of": 1}, "zzz_unheard_of", "is not a parameter of AzureBatchJobOperator (see help("),
    (
        {"tasks": [_task(comand_line="x")]},
        "tasks[0]",
        "has unknown field(s) comand_line (did you mean 'command_line'?)",
    ),
    (
        {"tasks": [_task(id="aaa"), _task(id="bbb", depends_on=["aa"])]},
        "tasks[1].depends_on",
        "names 'aa', which is not a task of this job (did you mean 'aaa'?)",
    ),
    (
        {"image": "MyRegistry.azurecr.io/Train Image:1"},
        "image",
        "'MyRegistry.azurecr.io/Train Image:1' is not a valid image reference: it has whitespace",
    ),
    (
        {"tasks": [_task(image="ubuntu:latset")]},
        "tasks[0].image",
        "'ubuntu:latset' names the tag 'latset': did you mean ubuntu:latest?",
    ),
    ({"azbatch_conn_id": ""}, "azbatch_conn_id", "is empty"),
    # Templated fields without a template are checked at once too: NaN would not even survive Airflow's
    # rendering (JSON), so it must be caught here.
    ({"tasks": [_task(max_wall_clock=math.nan)]}, "tasks[0].max_wall_clock", "must be a positive duration, got nan"),
    ({"tasks": [_task(depends_on=["t1"])]}, "tasks[0].depends_on", "names the task itself ('t1')"),
    ({"command": "true", "job_id": "bad id!"}, "job_id", "'bad id!' is not a valid Batch job id"),
    ({"tasks": []}, "tasks", "is empty: give at least one task"),
    ({"tasks": "echo hi"}, "tasks", "must be a list of task definitions, got str"),
    ({"command": "true", "environment": ["A=1"]}, "environment", "must be a mapping of variable names to strings"),
    ({"command": "true", "metadata": ["owner"]}, "metadata", "must be a mapping of names to strings, got list"),
    ({"command": "true", "inputs": {"container": "data"}}, "inputs", "must be a list of inputs, got dict"),
    # What exits mean (exit conditions, skip codes, fail-fast) and job preparation/release tasks.
    (
        {"tasks": [_task(exit_conditions={"exit_codes": {3: {"job_action": "stop"}}})]},
        "tasks[0].exit_conditions.exit_codes[3].job_action",
        "must be one of none, disable, terminate, got 'stop'",
    ),
    (
        {"tasks": [_task(exit_conditions={"default": {"dependency_action": "skip"}})]},
        "tasks[0].exit_conditions.default.dependency_action",
        "must be one of satisfy, block, got 'skip'",
    ),
    (
        {"tasks": [_task(exit_conditions={"exit_code_ranges": [{"start": 1, "end": 5}, {"start": 4, "end": 9}]})]},
        "tasks[0].exit_conditions.exit_code_ranges[1]",
        "(4..9) overlaps tasks[0].exit_conditions.exit_code_ranges[0] (1..5)",
    ),
    (
        {"tasks": [_task(exit_conditions={"exit_codes": {2**31: {}}})]},
        "tasks[0].exit_conditions.exit_codes[2147483648]",
        "must be between -2147483648 and 2147483647 (an exit code), got 2147483648",
    ),
    (
        {"tasks": [_task(exit_conditions={"exit_codes": {"3": {}}})]},
        "tasks[0].exit_conditions.exit_codes['3']",
        "must be a whole number (an exit code), got str '3'",
    ),
    (
        {"exit_conditions": {"exit_codes": {3: {"dependency_action": "satisfy"}}, "on_error": {}}},
        "exit_conditions",
        "has unknown field(s) on_error",
    ),
    ({"tasks": [_task(skip_on_exit_code=[1.5])]}, "tasks[0].skip_on_exit_code[0]", "must be a whole number"),
    ({"skip_on_exit_code": "42"}, "skip_on_exit_code", "must be a whole number (an exit code), got str '42'"),
    ({"skip_on_exit_code": [0, 1]}, "skip_on_exit_code", "cannot hold 0: a task that exits with 0 succeeded"),
    ({"fail_fast": "yes"}, "fail_fast", "must be True or False, got 'yes'"),
    (
        {"job_preparation": {"cmd": "fetch"}},
        "job_preparation",
        "has unknown field(s) cmd (did you mean 'command'?); known: command",
    ),
    (
        {"job_preparation": {"command": "fetch", "wait_for_success": "no"}},
        "job_preparation.wait_for_success",
        "must be True or False, got 'no'",
    ),
    ({"job_release": "cleanup"}, "job_release", "needs job_preparation: Batch runs a release task only with one"),
    (
        {"job_preparation": "fetch", "job_release": {"command": "clean", "max_wall_clock": 3600}},
        "job_release.max_wall_clock",
        "must be at most 15 minutes",
    ),
]


@pytest.mark.parametrize(("params", "field", "words"), AT_DEFINITION)
def test_refused_when_the_dag_is_defined(params, field, words):
    where = {} if "pool_id" in params or "batch_pool" in params else {"pool_id": "shared"}
    what = {} if {"command", "tasks", "fan_out", "command_template"} & set(params) else {"command": "true"}
    with pytest.raises(AzureBatchValidationError) as info:
        AzureBatchJobOperator(task_id="bad", **{**where, **what, **params})
    assert info.value.field == field
    assert words in str(info.value)


def _bad_connections(service) -> dict[str, dict]:
    """Connections each broken in one field (the local service's account otherwise)."""

    def connection(**changes) -> dict:
        conn = json.loads(azbatch_connection_json(service))
        conn["extra"].update(changes.pop("extra", {}))
        conn.update(changes)
        return conn

    no_url = connection()
    del no_url["extra"]["account_url"]
    return {
        "no_url": no_url,
        "bad_url": connection(extra={"account_url": "batch.example.com"}),
        "bad_key": connection(password="not base64!"),
        "wrong_key": connection(password="d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5"),
        "bad_method": connection(extra={"auth_method": "password"}),
        "sp_no_tenant": connection(
            extra={
                "account_url": "https://acct.westeurope.batch.azure.com",
                "auth_method": "service_principal",
                "client_id": "c",
                "client_secret": "s",
            }
        ),
        "token_over_http": connection(extra={"auth_method": "managed_identity"}),
        "extra_typo": connection(extra={"storage_acount_url": "http://127.0.0.1:1/devstoreaccount1"}),
        "registry_no_host": {"conn_type": "generic", "login": "u", "password": "p"},
    }


# A template that renders to nothing: the group of fields holding it is checked when the task runs.
T = "{{ '' }}"


def _templated(**fields):
    return {"id": "t1", "command_line": f"echo hi{T}", **fields}


# (operator parameters, words of the message) - refused when the task runs, before any create request.
AT_RUN = [
    ({"command": T}, "command is empty"),
    ({"command": f"true{T}", "tasks": [_task()]}, "tasks cannot be given with command"),
    ({"tasks": [_templated(id="a b")]}, "tasks[0].id 'a b' is not a valid Batch task id"),
    ({"tasks": [_templated(id="x" * 65)]}, "is not a valid Batch task id: use 1 to 64 letters"),
    ({"tasks": [_templated(cmd="true")]}, "tasks[0] has unknown field(s) cmd"),
    ({"tasks": [{"id": "t1", "display_name": T}]}, "tasks[0].command_line is missing"),
    ({"tasks": [_templated(depends_on=["t1"])]}, "tasks[0].depends_on names the task itself ('t1')"),
    (
        {"tasks": [_templated(id="a", depends_on=["b"]), _task(id="b", depends_on=["a"])]},
        "depends_on makes a cycle (a -> b -> a)",
    ),
    (
        {"tasks": [_templated(depends_on=["ghost"])]},
        "tasks[0].depends_on names 'ghost', which is not a task of this job",
    ),
    ({"tasks": [_templated(), _task(id="T1")]}, "tasks[1].id 'T1' repeats tasks[0].id"),
    (
        {"tasks": [_templated(environment={"A=B": "1"})]},
        "tasks[0].environment['A=B'] is not a valid environment variable",
    ),
    (
        {"tasks": [_templated(environment={"": "1"})]},
        "tasks[0].environment[''] is not a valid environment variable name",
    ),
    ({"tasks": [_templated(environment={"A": {"x": 1}})]}, "tasks[0].environment['A'] must be a string, got dict"),
    ({"command": "true", "environment": {"A": {"x": 1}, "B": T}}, "environment['A'] must be a string, got dict"),
    ({"command": "true", "environment": {"A": None, "B": T}}, "environment['A'] must be a string, got NoneType"),
    ({"tasks": [_templated(max_retries=-2)]}, "tasks[0].max_retries must be >= -1"),
    (
        {"command": "x" * (128 * 1024) + T},
        "command is 131072 bytes long; a node runs at most 131071 bytes as one command",
    ),
    (
        {"command": "true", "inputs": [{"container": "data", "path": f"../etc{T}"}]},
        "inputs[0].path '../etc' goes up with '..'",
    ),
    (
        {"command": "true", "inputs": [{"container": "data", "path": f"/etc{T}"}]},
        "inputs[0].path '/etc' is absolute",
    ),
    (
        {"command": "true", "outputs": [{"pattern": f"*{T}", "container": "results", "path": "a/../../b"}]},
        "outputs[0].path 'a/../../b' goes up with '..'",
    ),
    (
        {"command": "true", "display_name": "d" * 2000 + T},
        "display_name is 2000 characters long; the Batch service allows at most 1024",
    ),
    ({"command": "true", "metadata": {"owner": 7, "run": T}}, "metadata['owner'] must be a string, got int"),
    (
        {"command": "true", "metadata": {"azbatch-logs": f"x/y{T}"}},
        "metadata['azbatch-logs'] is set by the operator itself",
    ),
    ({"command": "true", "job_id": f"bad id!{T}"}, "job_id 'bad id!' is not a valid Batch job id"),
    ({"command": "true", "pool_id": f"bad pool{T}"}, "pool_id 'bad pool' is not a valid Batch pool id"),
    ({"command": "true", "pool_id": "no-such-pool"}, "pool_id 'no-such-pool' does not exist in Batch account"),
    ({"tasks": [_templated(required_slots=0)]}, "tasks[0].required_slots must be between 1 and 256, got 0"),
    ({"tasks": [_templated(num_nodes="2")]}, "tasks[0].num_nodes must be a whole number, got str"),
    ({"tasks": [_templated(coordination_command="setup")]}, "tasks[0].coordination_command needs num_nodes > 1"),
    (
        {"command_template": f"run {{name}}{T}", "parameters": [{"n": 1}]},
        "parameters[0] has no name for command_template",
    ),
    (
        {"command": "true", "outputs": [{"pattern": f"*{T}", "container": "Bad_Name"}]},
        "outputs[0].container 'Bad_Name' is not a valid Blob container name",
    ),
    ({"command": "true", "outputs": [{"pattern": "*.txt"}]}, "outputs[0].container is missing ('*.txt')"),
    ({"command": "true", "upload_logs": True}, "upload_logs needs output_container"),
    (
        {"command": "true", "registry_conn_id": "registry_no_host", "image": "img"},
        "Connection 'registry_no_host': host",
    ),
    (
        {"command": "true", "outputs": [{"pattern": "*", "container": "results"}]},
        "Connection 'azbatch_default': storage_account_url is missing",
    ),
    ({"command": "true", "azbatch_conn_id": "no_url"}, "Connection 'no_url': account_url is missing"),
    ({"command": "true", "azbatch_conn_id": "bad_url"}, "Connection 'bad_url': account_url is not a valid URL"),
    (
        {"command": "true", "azbatch_conn_id": "bad_key"},
        "Connection 'bad_key': password (Batch account key) is not base64",
    ),
    (
        {"command": "true", "azbatch_conn_id": "wrong_key"},
        "Connection 'wrong_key' was refused by the Batch account (AuthenticationFailed: Server failed to authenticate "
        "the request.",
    ),
    (
        {"command": "true", "azbatch_conn_id": "bad_method"},
        "Connection 'bad_method': auth_method is 'password'; use one of: auto",
    ),
    ({"command": "true", "azbatch_conn_id": "sp_no_tenant"}, "Connection 'sp_no_tenant': tenant_id is missing"),
    ({"command": "true", "azbatch_conn_id": "token_over_http"}, "Connection 'token_over_http': account_url uses http"),
    (
        {"command": "true", "azbatch_conn_id": "extra_typo"},
        "Connection 'extra_typo': extra has unknown field(s) storage_acount_url (did you mean 'storage_account_url'?)",
    ),
    (
        {"command": "true", "azbatch_conn_id": "nowhere_defined"},
        "Connection 'nowhere_defined' is not defined. Create it with `airflow connections add nowhere_defined "
        "--conn-type azbatch --conn-host https://<account>.<region>.batch.azure.com --conn-login <account> "
        "--conn-password <key>` (or in the UI, Admin > Connections), or set the environment variable "
        "AIRFLOW_CONN_NOWHERE_DEFINED to the connection as JSON",
    ),
]


def test_refused_when_the_task_runs_before_anything_is_created(airflow_db, azbatch_default, shared_pool, monkeypatch):
    service = azbatch_default
    for conn_id, conn in _bad_connections(service).items():
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    service.reset_request_counts()
    with DAG("bad_input", schedule=None, start_date=START) as dag:
        for index, (params, _) in enumerate(AT_RUN):
            AzureBatchJobOperator(task_id=f"case_{index:02d}", **{"pool_id": shared_pool, **params})
    run, logs = run_dag(dag)
    text = "\n".join(logs)
    assert run.state == "failed"
    missing = [words for _, words in AT_RUN if words not in text]
    assert missing == []
    assert {ti.state for ti in run.get_task_instances()} == {"failed"}
    created = {op: count for op, count in service.request_counts().items() if op in CREATES}
    assert created == {}


def test_enough_cases():
    assert len(AT_DEFINITION) + len(AT_RUN) >= 60

"""``@task.azure_batch`` and result files, against the local Batch service and Azurite, run by real Airflow:
arguments of every kind in, return values (and multiple outputs) back in XCom, remote errors in the task's
error, workspaces and images, and what is refused when the DAG is defined."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from airflow.sdk import DAG, task

from airflow_provider_azbatch.decorators.azure_batch import azure_batch_task
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag

pytestmark = pytest.mark.azurite
START = datetime(2026, 1, 1)
MODES = [pytest.param(False, id="sync"), pytest.param(True, id="deferrable")]
BIG = "x" * 1_000_000


def _error(logs: list[str]) -> str:
    return next(line for line in logs if "AirflowException: " in line).split("AirflowException: ", 1)[1]


def test_the_decorator_is_discovered_through_the_provider_info():
    from airflow_provider_azbatch.get_provider_info import get_provider_info

    assert {
        "name": "azure_batch",
        "class-name": "airflow_provider_azbatch.decorators.azure_batch.azure_batch_task",
    } in (get_provider_info()["task-decorators"])
    # What a DAG author writes: Airflow finds it among the installed providers' decorators.
    assert task.azure_batch is azure_batch_task


@pytest.mark.parametrize("deferrable", MODES)
def test_arguments_go_in_and_the_return_value_comes_back(airflow_db, azbatch_with_storage, shared_pool, deferrable):
    with DAG(f"taskflow_values_{deferrable}", schedule=None, start_date=START) as dag:

        @task
        def upstream() -> dict:
            return {"threshold": 0.5, "tags": ["a", "b"]}

        @task.azure_batch(pool_id=shared_pool, poll_interval=0.3, deferrable=deferrable)
        def score(name, config, *, big, weights=None):
            import os
            import platform

            print(f"scoring {name} on {platform.node() or 'a node'} in {os.path.basename(os.getcwd())}")
            return {
                "name": name,
                "threshold": config["threshold"],
                "tags": config["tags"] + [len(big)],
                "weights": weights,
                "cwd_is_working_dir": os.getcwd() == os.environ["AZ_BATCH_TASK_WORKING_DIR"],
            }

        @task
        def downstream(scored: dict) -> str:
            return f"downstream got {scored['name']} {scored['tags']}"

        scored = score("model-7", upstream(), big=BIG, weights={"layer": [1, 2.5, None]})
        downstream(scored)
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-40:])
    assert run.get_task_instance("score").xcom_pull(task_ids="score") == {
        "name": "model-7",
        "threshold": 0.5,
        "tags": ["a", "b", 1_000_000],
        "weights": {"layer": [1, 2.5, None]},
        "cwd_is_working_dir": True,
    }
    assert run.get_task_instance("downstream").xcom_pull(task_ids="downstream") == (
        "downstream got model-7 ['a', 'b', 1000000]"
    )
    assert any(line.startswith("[main] scoring model-7 on ") and line.endswith(" in wd") for line in logs)


@pytest.mark.parametrize("deferrable", MODES)
def test_multiple_outputs_fan_out_the_keys(airflow_db, azbatch_with_storage, shared_pool, deferrable):
    with DAG(f"taskflow_multiple_{deferrable}", schedule=None, start_date=START) as dag:

        @task.azure_batch(pool_id=shared_pool, poll_interval=0.3, deferrable=deferrable, multiple_outputs=True)
        def metrics():
            return {"auc": 0.91, "loss": 0.2}

        @task
        def promote(auc: float) -> bool:
            return auc > 0.9

        promote(metrics()["auc"])
    run, _ = run_dag(dag)
    assert run.state == "success"
    ti = run.get_task_instance("metrics")
    assert ti.xcom_pull(task_ids="metrics", key="auc") == 0.91
    assert ti.xcom_pull(task_ids="metrics", key="loss") == 0.2
    assert run.get_task_instance("promote").xcom_pull(task_ids="promote") is True


@pytest.mark.parametrize("deferrable", MODES)
def test_a_function_that_raises_fails_the_task_with_its_exception(
    airflow_db, azbatch_with_storage, shared_pool, deferrable
):
    with DAG(f"taskflow_raises_{deferrable}", schedule=None, start_date=START) as dag:

        @task.azure_batch(pool_id=shared_pool, poll_interval=0.3, deferrable=deferrable)
        def check(rows: int):
            if rows < 10:
                raise ValueError(f"only {rows} rows: need at least 10")
            return rows

        check(3)
    run, logs = run_dag(dag)
    assert run.get_task_instance("check").state == "failed"
    error = _error(logs)
    assert error.startswith("ValueError: only 3 rows: need at least 10 (in check(), "), error
    assert re.match(r"ValueError: [^\n]* \(in check\(\), check\.py line 3: raise ValueError\(", error)
    assert "Task 'main' failed with exit code 1" in error
    # The whole traceback is in the log, as stderr.
    assert "[main:stderr] ValueError: only 3 rows: need at least 10" in logs


def test_a_return_value_that_is_not_json_fails_naming_its_type(airflow_db, azbatch_with_storage, shared_pool):
    with DAG("taskflow_not_json", schedule=None, start_date=START) as dag:

        @task.azure_batch(pool_id=shared_pool, poll_interval=0.3)
        def unique(values: list):
            return set(values)

        unique([1, 2, 2])
    run, logs = run_dag(dag)
    assert run.get_task_instance("unique").state == "failed"
    error = _error(logs)
    assert error.startswith(
        "ReturnValueError: the return value of unique() cannot be returned as JSON: set: Object of type set is not "
        "JSON serializable (serializer='json': return dicts, lists, strings, numbers, booleans or None)"
    ), error


def test_a_workspace_module_and_a_container_image(airflow_db, azbatch_with_storage, shared_pool, tmp_path):
    code = tmp_path / "code"
    (code / "scoring").mkdir(parents=True)
    (code / "scoring" / "__init__.py").write_text("def auc(values):\n    return round(sum(values) / len(values), 3)\n")
    with DAG("taskflow_workspace", schedule=None, start_date=START) as dag:

        @task.azure_batch(pool_id=shared_pool, workspace=str(code), poll_interval=0.3)
        def evaluate(values):
            import scoring

            return scoring.auc(values)

        @task.azure_batch(
            batch_pool=BatchPool.shared("taskflow-containers", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
            image="python:3.11-slim",
            python="python3",
            poll_interval=0.3,
        )
        def in_image():
            import sys

            return sys.version_info[0]

        evaluate([0.5, 1.0])
        in_image()
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-40:])
    assert run.get_task_instance("evaluate").xcom_pull(task_ids="evaluate") == 0.75
    assert run.get_task_instance("in_image").xcom_pull(task_ids="in_image") == 3


def test_what_cannot_run_on_a_node_is_refused_when_the_dag_is_defined(shared_pool):
    async def fetch():
        return 1

    def numbers():
        yield 1

    for function, words in (
        (fetch, "cannot run fetch(): it is async"),
        (numbers, "cannot run numbers(): it is a generator (it uses yield)"),
        (lambda: 1, "cannot run a lambda"),
    ):
        with DAG("taskflow_refused", schedule=None, start_date=START), pytest.raises(AzureBatchValidationError) as info:
            azure_batch_task(function, pool_id=shared_pool)()
        assert words in str(info.value)

    def plain():
        return 1

    with DAG("taskflow_owned", schedule=None, start_date=START):
        with pytest.raises(AzureBatchValidationError, match=r"^command is set by @task\.azure_batch itself"):
            azure_batch_task(plain, pool_id=shared_pool, command="echo")()
        with pytest.raises(AzureBatchValidationError, match=r"^serializer must be one of json, pickle, cloudpickle"):
            azure_batch_task(plain, pool_id=shared_pool, serializer="dill")()


def test_result_files_of_a_three_task_job_and_one_that_is_not_json(airflow_db, azbatch_with_storage, shared_pool):
    with DAG("result_files", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="three",
            pool_id=shared_pool,
            tasks=[
                {"id": f"part-{n}", "command_line": f'echo \'{{"part": {n}, "rows": {n * 10}}}\' > out.json'}
                for n in range(3)
            ],
            result_file="out.json",
            poll_interval=0.3,
        )
        AzureBatchJobOperator(
            task_id="single",
            pool_id=shared_pool,
            command="mkdir -p out && echo '[1, 2, 3]' > out/values.json",
            result_file="out/values.json",
            poll_interval=0.3,
        )
        AzureBatchJobOperator(
            task_id="malformed",
            pool_id=shared_pool,
            tasks=[
                {"id": "good", "command_line": "echo '{}' > r.json", "result_file": "r.json"},
                {"id": "bad", "command_line": "echo '{oops' > r.json", "result_file": "r.json"},
            ],
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    results = run.get_task_instance("three").xcom_pull(task_ids="three")["results"]
    assert results == {f"part-{n}": {"part": n, "rows": n * 10} for n in range(3)}
    single = run.get_task_instance("single").xcom_pull(task_ids="single")
    assert single["results"] == {"main": [1, 2, 3]}
    assert single["return_value"] == [1, 2, 3]
    assert run.get_task_instance("malformed").state == "failed"
    error = next(line for line in logs if "wrote a result file" in line)
    assert re.search(
        r"Batch task 'bad' of job \S+ wrote a result file 'r\.json' that is not JSON: Expecting property name", error
    )


def test_pickle_carries_what_json_cannot_with_a_warning_when_the_dag_is_defined(
    airflow_db, azbatch_with_storage, shared_pool
):
    from datetime import date

    with DAG("taskflow_pickle", schedule=None, start_date=START) as dag:

        @task.azure_batch(pool_id=shared_pool, serializer="pickle", poll_interval=0.3)
        def days(dates: set) -> list:
            return sorted(day.isoformat() for day in dates)

        with pytest.warns(UserWarning, match=r"serializer='pickle': the arguments and the return value are pickled"):
            days({date(2026, 1, 2), date(2026, 1, 1)})
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-30:])
    assert run.get_task_instance("days").xcom_pull(task_ids="days") == ["2026-01-01", "2026-01-02"]


def test_task_imported_under_another_name_with_stacked_decorators(airflow_db, azbatch_with_storage, shared_pool):
    """Only the def travels: `@sdk_task.azure_batch` (and `@sdk_task.run_if`) stay where the DAG is defined (the
    same in both modes: the source is taken before the job is submitted)."""
    from airflow.sdk import task as sdk_task

    with DAG("taskflow_alias", schedule=None, start_date=START) as dag:

        @sdk_task.run_if(lambda context: True)
        @sdk_task.azure_batch(
            pool_id=shared_pool,
            poll_interval=0.3,
        )
        # A comment between the decorators and the def.
        def doubled(value: int) -> int:
            return value * 2

        doubled(21)
    run, logs = run_dag(dag)
    assert run.state == "success", "\n".join(logs[-40:])
    assert run.get_task_instance("doubled").xcom_pull(task_ids="doubled") == 42


def test_a_decorator_that_cannot_travel_is_refused_when_the_dag_is_defined(shared_pool):
    def traced(function):
        return function

    @task.azure_batch(pool_id=shared_pool)
    @traced
    def work():
        return 1

    with (
        DAG("taskflow_foreign_decorator", schedule=None, start_date=START),
        pytest.raises(AzureBatchValidationError) as info,
    ):
        work()
    assert str(info.value) == (
        "@task.azure_batch cannot run work() decorated with @traced: only the function's own source travels to "
        "the node, without its decorators; call what the decorator does inside the function instead"
    )

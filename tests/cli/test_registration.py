"""``airflow azbatch`` is registered through the provider info, cheaply, and runs as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_azbatch.get_provider_info import get_provider_info
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from tests.airflow_helpers import run_dag
from tests.cli.batch_jobs import create_job, task, wait_job_done


def test_provider_info_names_the_command_definitions():
    from airflow_provider_azbatch.cli.definition import get_azbatch_cli_commands

    assert get_provider_info()["cli"] == ["airflow_provider_azbatch.cli.definition.get_azbatch_cli_commands"]
    (group,) = get_azbatch_cli_commands()
    assert group.name == "azbatch"
    assert [command.name for command in group.subcommands] == ["check", "jobs", "logs", "pools"]
    _, jobs, _, pools = group.subcommands
    assert [command.name for command in jobs.subcommands] == ["list", "describe", "cancel"]
    assert [command.name for command in pools.subcommands] == ["list", "describe", "nodes", "upload-logs", "delete"]


def test_defining_the_commands_imports_neither_the_sdk_nor_the_commands():
    code = (
        "import sys, airflow_provider_azbatch.cli.definition as d; d.get_azbatch_cli_commands(); "
        "print(sorted(m for m in sys.modules if m.startswith(('azure', 'airflow_provider_azbatch'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    # Airflow itself reads the provider info while it starts; nothing else of the provider is imported.
    assert done.stdout.strip().splitlines()[-1] == str(
        [
            "airflow_provider_azbatch",
            "airflow_provider_azbatch.cli",
            "airflow_provider_azbatch.cli.definition",
            "airflow_provider_azbatch.get_provider_info",
        ]
    )


def test_airflow_azbatch_help_lists_the_groups(airflow_cli):
    result = airflow_cli("--help")

    assert result.code == 0, result.err
    assert "Usage: airflow azbatch [-h] COMMAND ..." in result.out
    listed = [line.split()[0] for line in result.lines if line.startswith("    ")]
    assert listed == ["check", "jobs", "logs", "pools"]
    assert "    jobs      Batch jobs: list, describe, cancel" in result.lines
    assert "    pools     Batch pools: list, describe, nodes, upload-logs, delete" in result.lines


def test_a_session_with_an_operator_job(airflow_db, azbatch_default, shared_pool, airflow_cli, cli):
    """The operator records which task instance submitted the job; the command line finds it by that."""
    with DAG("cli_session", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        AzureBatchJobOperator(task_id="hello", pool_id=shared_pool, command="echo hello from batch", poll_interval=0.3)
    run, logs = run_dag(dag)
    assert run.state == "success"
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))

    listed = airflow_cli("jobs", "list", "--dag-id", "cli_session", "-o", "json")
    output = cli("logs", "-d", "cli_session", "-t", "hello", "-r", run.run_id)
    unknown = airflow_cli("jobs", "describe", "no-such-job")

    assert listed.code == 0, listed.err
    (job,) = json.loads(listed.out)
    assert (job["id"], job["dag_id"], job["task_id"], job["run_id"], job["map_index"]) == (
        job_id,
        "cli_session",
        "hello",
        run.run_id,
        None,
    )
    assert (output.code, output.out) == (0, "[main] hello from batch\n"), output.err
    assert (unknown.code, unknown.out) == (1, "")
    assert unknown.err.strip().splitlines()[-1] == (
        "Batch job 'no-such-job' does not exist in Batch account 'devbatchaccount1'"
    )
    assert "Traceback" not in unknown.err


def test_a_pipe_that_closes_early_ends_the_command_quietly(azbatch_default, batch_client, shared_pool, airflow_cli):
    create_job(batch_client, "cli-pipe", shared_pool, [task("many", "seq 1 200000")])
    wait_job_done(batch_client, "cli-pipe")
    env = dict(os.environ)
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    done = subprocess.run(
        f"'{Path(sys.executable).with_name('airflow')}' azbatch logs cli-pipe many | head -n 2",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.stdout == "1\n2\n"
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr


def test_a_connection_kept_in_the_metadata_db(airflow_db, local_batch_service, shared_pool, cli):
    """Made in the UI or with ``airflow connections add``: the task SDK's lookup outside a task would miss it."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    with create_session() as session:
        session.add(
            Connection(
                conn_id="azbatch_in_db",
                conn_type="azbatch",
                login=local_batch_service.account_name,
                password=local_batch_service.account_key,
                extra=json.dumps({"account_url": local_batch_service.url}),
            )
        )
    try:
        result = cli("pools", "describe", shared_pool, "--conn-id", "azbatch_in_db", "-o", "json")
    finally:
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == "azbatch_in_db").delete()

    assert result.code == 0, result.err
    assert json.loads(result.out)["id"] == shared_pool

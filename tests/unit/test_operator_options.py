"""The operator's options are declared once (specs/operator_options.py): its written signature and ``:param``
docs are the declaration's, and Airflow reads them as from any operator."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.specs.operator_options import OPTIONS, what_runs
from airflow_provider_azbatch.watching.outages import DEFAULT_MAX_OUTAGE_SECONDS

ROOT = Path(__file__).resolve().parents[2]


def test_the_operator_is_written_from_the_declaration():
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "operator_options.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout


def test_every_keyword_of_the_operator_is_declared_with_its_default():
    parameters = inspect.signature(AzureBatchJobOperator.__init__).parameters
    keywords = [p for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert [p.name for p in keywords] == [option.name for option in OPTIONS]
    names = {"DEFAULT_MAX_OUTAGE_SECONDS": DEFAULT_MAX_OUTAGE_SECONDS}
    for option, parameter in zip(OPTIONS, keywords, strict=True):
        assert parameter.default == eval(option.default, names), option.name


def test_every_option_has_its_param_doc():
    doc = AzureBatchJobOperator.__doc__ or ""
    for option in OPTIONS:
        assert f":param {option.name}: " in doc


@pytest.mark.parametrize(("name", "value"), [("skip_on_exit_code", 3), ("azbatch_conn_id", "other"), ("num_nodes", 2)])
def test_airflow_applies_default_args_to_declared_options(name, value):
    from airflow.sdk import DAG

    with DAG("options", schedule=None, default_args={name: value}):
        operator = AzureBatchJobOperator(task_id="t", pool_id="p", command="x")
    read = {"skip_on_exit_code": frozenset({3}), "azbatch_conn_id": "other", "num_nodes": 2}[name]
    assert getattr(operator, name) == read


def test_the_faces_that_decide_what_runs_refuse_its_options():
    assert what_runs() == ("command", "tasks", "fan_out", "command_template", "parameters", "task_id_prefix")

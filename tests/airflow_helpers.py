"""Running real DAGs inside the test process (``dag.test()``) and reading what they logged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def sync_dag_to_db(dag: Any, bundle_name: str = "dags-folder") -> None:
    """Airflow 3.1+ refuses ``dag.test()`` for a DAG that was never serialized (built in a test)."""
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    if not hasattr(LazyDeserializedDAG, "from_dag"):  # 3.0: dag.test() serializes the DAG itself
        return
    try:  # 3.2+
        from airflow.serialization.definitions.dag import SerializedDAG
    except ImportError:  # 3.1
        from airflow.serialization.serialized_objects import SerializedDAG

    with create_session() as session:
        session.merge(DagBundleModel(name=bundle_name))
        session.flush()
        SerializedDAG.bulk_write_to_db(bundle_name, None, [dag], session=session)
        SerializedDagModel.write_dag(LazyDeserializedDAG.from_dag(dag), bundle_name, None, session=session)


@contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Operator and trigger logs are structlog in Airflow 3 (pytest's caplog does not see them)."""
    import structlog

    # format_exc_info turns a logged exception into text, so tests can read task failure messages.
    with structlog.testing.capture_logs(processors=[structlog.processors.format_exc_info]) as logs:
        yield logs


def messages(logs: list[dict[str, Any]]) -> list[str]:
    out = []
    for entry in logs:
        out.append(str(entry.get("event", "")))
        if entry.get("exception"):
            out.append(str(entry["exception"]))
    return out


def run_dag(dag: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """Run the DAG in-process; (dag run, every log message it produced)."""
    sync_dag_to_db(dag)
    with captured_logs() as logs:
        run = dag.test(**kwargs)
    return run, messages(logs)


def azbatch_connection_json(service: Any, **extra: Any) -> str:
    return json.dumps(
        {
            "conn_type": "azbatch",
            "login": service.account_name,
            "password": service.account_key,
            "extra": {"account_url": service.url, **extra},
        }
    )

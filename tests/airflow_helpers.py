"""Running real DAGs inside the test process (``dag.test()``) and reading what they logged."""

from __future__ import annotations

import json
import logging
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


def _operators_log_to_stdlib() -> bool:
    """Airflow 3.0's operators log through the standard library; 3.1+ through structlog."""
    import logging

    from airflow.sdk import BaseOperator

    return isinstance(BaseOperator(task_id="probe").log, logging.Logger)


class _Records(logging.Handler):
    """Standard library log records, kept as the entries structlog's capture makes."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        super().__init__(logging.INFO)
        self.entries = entries

    def emit(self, record: logging.LogRecord) -> None:
        entry: dict[str, Any] = {"event": record.getMessage(), "logger": record.name, "log_level": record.levelname}
        if record.exc_info:
            entry["exception"] = logging.Formatter().formatException(record.exc_info)
        self.entries.append(entry)


@contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Operator and trigger logs are structlog in Airflow 3.1+ (pytest's caplog does not see them); 3.0's
    operators log through the standard library, captured into the same list."""
    with _captured_structlog() as logs:
        if not _operators_log_to_stdlib():
            yield logs
            return
        handler = _Records(logs)
        root, task = logging.getLogger(), logging.getLogger("airflow.task")
        propagate = task.propagate
        root.addHandler(handler)
        task.propagate = True  # to the one handler on the root logger
        try:
            yield logs
        finally:
            task.propagate = propagate
            root.removeHandler(handler)


@contextmanager
def _captured_structlog() -> Iterator[list[dict[str, Any]]]:
    import inspect

    import structlog
    from structlog.testing import LogCapture, capture_logs

    # format_exc_info turns a logged exception into text, so tests can read task failure messages.
    if "processors" in inspect.signature(capture_logs).parameters:  # structlog 25.5+
        with capture_logs(processors=[structlog.processors.format_exc_info]) as logs:
            yield logs
        return
    # Older structlog (Airflow 3.0's): capture_logs' own recipe with the processor added. The list is
    # changed in place, as capture_logs does, so that loggers already bound to it capture too.
    capture = LogCapture()
    processors = structlog.get_config()["processors"]
    saved = processors.copy()
    try:
        processors.clear()
        processors.extend([structlog.processors.format_exc_info, capture])
        structlog.configure(processors=processors)
        yield capture.entries
    finally:
        processors.clear()
        processors.extend(saved)
        structlog.configure(processors=processors)


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

"""Run one of tests/lineage's DAGs with ``dag.test()`` in a fresh interpreter, and write what happened as JSON.

A process of its own: the OpenLineage provider reads its configuration (the file transport) once per process, when
Airflow loads its plugin. With ``BLOCK_OPENLINEAGE=1`` the provider and its client are as if not installed: their
modules cannot be imported and their distributions are not listed (Airflow finds providers and plugins by their
distributions' entry points); the output says which of their modules were imported all the same (none, it must be).

Usage: ``python -m tests.lineage.run_dag <dag id>[,<dag id>...] <pool id> <output.json>`` (the output: what each DAG's
run did, by DAG id); AIRFLOW_HOME and the connection come from the environment.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import json
import os
import sys

BLOCKED = ("openlineage", "airflow.providers.openlineage")
BLOCKED_DISTRIBUTIONS = ("apache-airflow-providers-openlineage", "openlineage-")


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if any(name == blocked or name.startswith(f"{blocked}.") for blocked in BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _installed(distributions):  # type: ignore[no-untyped-def]
    def listed(**kwargs):  # type: ignore[no-untyped-def]
        for distribution in distributions(**kwargs):
            name = (distribution.metadata["Name"] or "").lower().replace("_", "-")
            if not name.startswith(BLOCKED_DISTRIBUTIONS):
                yield distribution

    return listed


if os.environ.get("BLOCK_OPENLINEAGE") == "1":
    sys.meta_path.insert(0, _NotInstalled())
    importlib.metadata.distributions = _installed(importlib.metadata.distributions)
    try:  # Airflow reads entry points through the backport before Python 3.12
        import importlib_metadata
    except ImportError:
        pass
    else:
        importlib_metadata.distributions = _installed(importlib_metadata.distributions)


def main(dag_ids: str, pool_id: str, output: str) -> None:
    from airflow.utils import db

    db.initdb()
    results = {dag_id: run_one(dag_id, pool_id) for dag_id in dag_ids.split(",")}
    with open(output, "w") as file:
        json.dump(results, file, default=str)


def _activate_assets_on_3_0(dag) -> None:  # type: ignore[no-untyped-def]
    """Airflow 3.0's ``dag.test()`` leaves a DAG's assets inactive (its task then refuses its outlets): activate them
    as the DAG processor does. 3.1+ does it in tests.airflow_helpers.sync_dag_to_db."""
    from airflow.serialization.serialized_objects import LazyDeserializedDAG, SerializedDAG

    if hasattr(LazyDeserializedDAG, "from_dag"):
        return
    from airflow.models.dag import DAG as SchedulerDAG
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session

    with create_session() as session:
        session.merge(DagBundleModel(name="dags-folder"))
        session.flush()
        scheduler_dag = SerializedDAG.deserialize_dag(SerializedDAG.serialize_dag(dag))
        SchedulerDAG.bulk_write_to_db("dags-folder", None, [scheduler_dag], session=session)


def run_one(dag_id: str, pool_id: str) -> dict:
    from tests.airflow_helpers import run_dag
    from tests.lineage.lineage_dags import DAGS

    dag = DAGS[dag_id](pool_id)
    _activate_assets_on_3_0(dag)
    run, logs = run_dag(dag)
    from airflow.models.asset import AssetEvent
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        events = [
            {"uri": event.asset.uri, "name": event.asset.name, "extra": event.extra}
            for event in session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id)
        ]
        xcom = session.query(XComModel).filter_by(run_id=run.run_id, task_id="train", key="return_value").first()
        value = XComModel.deserialize_value(xcom) if xcom is not None else None
    imported = sorted(name for name in sys.modules if any(name.startswith(blocked) for blocked in BLOCKED))
    # What the provider told Airflow's hook lineage collector in this process (so far: the runs before too).
    from airflow_provider_azbatch.compat import hook_lineage_collector

    collected = hook_lineage_collector().collected_assets
    return {
        "state": str(run.state),
        "task_state": str(run.get_task_instance("train").state),
        "run_id": run.run_id,
        "xcom": value,
        "asset_events": events,
        "imported": imported,
        "hook_inputs": sorted({info.asset.uri for info in collected.inputs}),
        "hook_outputs": sorted({info.asset.uri for info in collected.outputs}),
        "logs": logs,
    }


if __name__ == "__main__":
    main(*sys.argv[1:4])

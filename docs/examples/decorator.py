"""A Python function run on Batch, its return value in XCom, and a branch on it (docs/howto/decorator.md)."""

from __future__ import annotations

from datetime import datetime

# [START howto_decorator]
from airflow.sdk import DAG, task

from airflow_provider_azbatch.pools import BatchPool


@task.azure_batch(batch_pool=BatchPool.shared("gpu", requirements={"gpus": 1}), workspace="code", deferrable=True)
def evaluate(model_uri: str, threshold: float) -> dict:
    import metrics  # code/metrics.py: the workspace is importable

    auc = metrics.auc(model_uri)
    return {"auc": auc, "promote": auc >= threshold}


@task.branch
def promote_or_hold(result: dict) -> str:
    return "promote" if result["promote"] else "hold"


# [END howto_decorator]

with DAG(dag_id="docs_decorator", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    promote_or_hold(evaluate("models/latest", 0.9))

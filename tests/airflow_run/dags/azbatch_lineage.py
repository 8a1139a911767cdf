"""Lineage in a real deployment: a deferred ``@task.azure_batch`` training function whose model output is an asset,
and an evaluation DAG scheduled on that asset, which returns what the triggering event carried."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, task

from airflow_provider_azbatch.pools import BatchPool

# [START howto_assets]
MODEL = Asset("azbatch_lineage_model")

with DAG("azbatch_lineage_training", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as training:

    @task.azure_batch(
        batch_pool=BatchPool.shared("lineage-pool", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        inputs=[{"container": "lineage-in", "prefix": "data/", "path": "in"}],
        outputs=[
            {
                "pattern": "model/*",
                "path": "models/{{ run_id | replace(':', '_') | replace('+', '_') }}",
                "asset": MODEL,
            }
        ],
        output_container="lineage-out",
        deferrable=True,
        poll_interval=0.5,
    )
    def train() -> dict:
        import os

        with open("in/data/a.txt") as data:
            rows = data.read().split()
        os.makedirs("model", exist_ok=True)
        with open("model/weights.bin", "w") as weights:
            weights.write("w" * len(rows))
        return {"auc": 0.91, "rows": len(rows)}

    train()


with DAG("azbatch_lineage_evaluation", schedule=[MODEL], start_date=datetime(2026, 1, 1), catchup=False) as evaluation:

    @task
    def evaluate(triggering_asset_events=None) -> list:
        return [
            {"source_run_id": event.source_run_id, **event.extra}
            for events in triggering_asset_events.values()
            for event in events
        ]

    evaluate()
# [END howto_assets]

"""Values from any Batch task: result files read back into XCom (docs/howto/decorator.md)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

with DAG(dag_id="docs_result_files", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    # [START howto_result_file]
    AzureBatchJobOperator(
        task_id="score",
        pool_id="cpu-pool",
        tasks=[{"id": f"part-{n}", "command_line": f"python3 score.py --part {n} --out result.json"} for n in range(3)],
        result_file="result.json",
    )
    # XCom: {..., "results": {"part-0": {...}, "part-1": {...}, "part-2": {...}}}
    # [END howto_result_file]

"""`make demo`: run the example DAG against the local Batch service and show its output.

Starts the local Batch service, points the ``azbatch_default`` connection at it, runs
``airflow dags test example_azbatch_hello`` in a throwaway AIRFLOW_HOME (.demo/), stops the
service, and exits with the DAG run's status.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from local_azure_batch.testing import run_local_batch_service

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / ".demo"
DAG_ID = "example_azbatch_hello"


def main() -> int:
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir()
    print("== Starting the local Batch service", flush=True)
    with run_local_batch_service(extra_args=["--quiet"]) as batch:
        print(f"   {batch.url} (account {batch.account_name})", flush=True)
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(HOME),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "example_dags"),
            "AIRFLOW_CONN_AZBATCH_DEFAULT": json.dumps(
                {
                    "conn_type": "azbatch",
                    "login": batch.account_name,
                    "password": batch.account_key,
                    "extra": {"account_url": batch.url},
                }
            ),
        }
        airflow = str(Path(sys.executable).with_name("airflow"))
        print("== Preparing a throwaway Airflow home in .demo/", flush=True)
        migrate = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True)
        if migrate.returncode != 0:
            print(migrate.stdout[-4000:], migrate.stderr[-4000:], sep="\n")
            return migrate.returncode
        print(f"== airflow dags test {DAG_ID}", flush=True)
        result = subprocess.run([airflow, "dags", "test", DAG_ID], env=env)
    print(f"== Done: airflow dags test exited with {result.returncode}", flush=True)
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())

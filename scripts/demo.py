"""`make demo`: run the example DAG against the local Batch service and show its output.

Starts the local Batch service, points the ``azbatch_default`` connection at it, runs
``airflow dags test example_azbatch_hello`` in a throwaway AIRFLOW_HOME (.demo/), stops the
service, and exits with the DAG run's status. Airflow's DAG folder is ``.demo/dags``, holding links to the
example DAGs it runs only: the others may need extras the venv lacks (the training example, TorchX), and
Airflow parses every file of its DAG folder.

``python scripts/demo.py [--home DIR] [DAG_ID ...]`` runs other example DAGs the same way, one after the
other (``make compat-examples`` runs both examples on each Airflow line). A run counts as a success when
``airflow dags test`` exits 0 and the Batch tasks' output reached the Airflow log.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from local_azure_batch.testing import run_local_batch_service

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "example_dags"
DEFAULT_DAG = "example_azbatch_hello"
# A line each example's Batch tasks print, which must reach the Airflow log.
EXPECTED_OUTPUT = {
    "example_azbatch_hello": "[shard-3] shard 3: processed record 5 on ",
    "example_azbatch_deferrable": "[train] step 80/80 loss 12",
}


def run_dag(airflow: str, dag_id: str, env: dict[str, str]) -> bool:
    print(f"== airflow dags test {dag_id}", flush=True)
    started = time.monotonic()
    process = subprocess.Popen(
        [airflow, "dags", "test", dag_id], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    seen = False
    expected = EXPECTED_OUTPUT.get(dag_id)
    for line in process.stdout:
        sys.stdout.write(line)
        seen = seen or (expected is not None and expected in line)
    code = process.wait()
    elapsed = time.monotonic() - started
    if code != 0:
        print(f"== {dag_id}: airflow dags test exited with {code} ({elapsed:.0f} s)", flush=True)
        return False
    if expected is not None and not seen:
        print(f"== {dag_id}: the Batch tasks' output is missing from the log (no {expected!r})", flush=True)
        return False
    print(f"== {dag_id}: succeeded in {elapsed:.0f} s", flush=True)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description="Run example DAGs against the local Batch service.")
    parser.add_argument("dag_ids", nargs="*", default=[DEFAULT_DAG], metavar="DAG_ID")
    parser.add_argument("--home", default=".demo", help="the throwaway AIRFLOW_HOME (default: .demo)")
    args = parser.parse_args()
    home = (ROOT / args.home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    dags = home / "dags"
    dags.mkdir(parents=True)
    for dag_id in args.dag_ids:
        source = EXAMPLES / f"{dag_id}.py"
        if not source.exists():
            parser.error(f"no example DAG {dag_id}: {source.relative_to(ROOT)} does not exist")
        (dags / source.name).symlink_to(source)
    print("== Starting the local Batch service", flush=True)
    with run_local_batch_service(extra_args=["--quiet"]) as batch:
        print(f"   {batch.url} (account {batch.account_name})", flush=True)
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
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
        print(f"== Preparing a throwaway Airflow home in {args.home}/", flush=True)
        migrate = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True)
        if migrate.returncode != 0:
            print(migrate.stdout[-4000:], migrate.stderr[-4000:], sep="\n")
            return migrate.returncode
        failed = [dag_id for dag_id in args.dag_ids if not run_dag(airflow, dag_id, env)]
    print(f"== Done: {len(args.dag_ids) - len(failed)} of {len(args.dag_ids)} DAG(s) succeeded", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How long a `torchx status` takes, and what of it is start-up (docs/howto/torchx.md, "Start-up cost").

Runs against a local Batch service with one finished app, each command N times (cold first run dropped):

- `python -c "import torchx.cli.main"`: the floor, TorchX alone;
- `torchx status <handle>` on an Airflow connection (AIRFLOW_CONN_...);
- `torchx status <handle>` on an account given by URL (no Airflow set-up: a throwaway AIRFLOW_HOME);
- `python -c "import airflow_provider_azbatch.hooks.batch"`: what the provider's import (Airflow) costs.

    .venv/bin/python bench/torchx_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from local_azure_batch.testing import run_local_batch_service


def timed(command: list[str], env: dict[str, str], cwd: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = sys.executable
    torchx = [python, "-m", "torchx.cli.main"]
    with tempfile.TemporaryDirectory() as work, run_local_batch_service(extra_args=["--quiet"]) as batch:
        base = {**os.environ, "AIRFLOW_HOME": os.path.join(work, "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
        connection = json.dumps(
            {
                "conn_type": "azbatch",
                "login": batch.account_name,
                "password": batch.account_key,
                "extra": {"account_url": batch.url},
            }
        )
        with_conn = {**base, "AIRFLOW_CONN_AZBATCH_DEFAULT": connection}
        by_url = {**base, "AZURE_BATCH_ACCESS_KEY": batch.account_key}
        _, out = timed([*torchx, "run", "-s", "azure_batch", "utils.echo"], with_conn, work)
        handle = out.strip()
        with open(os.path.join(work, ".torchxconfig"), "w") as config:
            # How a handle naming the account by URL is reached (the local service's name is not its host's).
            config.write(f"[azure_batch]\naccount_url = {batch.url}\naccount_name = {batch.account_name}\n")
        host = batch.url.split("://", 1)[1]
        url_handle = handle.replace("azbatch_default:", f"http@{host}:")
        cases = {
            "import torchx.cli.main (TorchX alone)": ([python, "-c", "import torchx.cli.main"], base),
            "import the provider's hook (Airflow)": (
                [python, "-c", "import airflow_provider_azbatch.hooks.batch"],
                base,
            ),
            "torchx status, Airflow connection": ([*torchx, "status", handle], with_conn),
            "torchx status, account by URL": ([*torchx, "status", url_handle], by_url),
        }
        print(f"| command | median of {args.runs} (s) | min (s) |")
        print("|---|---|---|")
        for name, (command, env) in cases.items():
            timed(command, env, work)  # cold: page cache, .pyc
            times = [timed(command, env, work)[0] for _ in range(args.runs)]
            print(f"| {name} | {statistics.median(times):.2f} | {min(times):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How long ``torchx status`` of a running app takes on ``azure_batch``, against TorchX's own ``local_cwd``
(docs/howto/torchx.md, "Start-up cost"; results in bench/torchx-startup-results.md).

Against a local Batch service, with one app running on each scheduler, each command runs N times (a cold first
run dropped) and the medians are compared:

- ``torchx status`` of a ``local_cwd`` app: TorchX's start-up and its own scheduler's answer. ``local_cwd``
  keeps its apps in the process that ran them, so another process's ``status`` answers that the app does not
  exist (exit 1) after the same start-up: the floor of any ``torchx status``;
- ``torchx status`` of an ``azure_batch`` app, the account in ``AIRFLOW_CONN_AZBATCH_DEFAULT`` (JSON): Airflow
  is not imported;
- the same, the account given by URL (``.torchxconfig``, the key in ``AZURE_BATCH_ACCESS_KEY``);
- the same, the connection in a secrets backend: read through Airflow, which is imported.

Done when the ``AIRFLOW_CONN_AZBATCH_DEFAULT`` median is within 1 s of ``local_cwd``'s.

    .venv/bin/python bench/torchx_startup.py [--runs 7]      # make bench-torchx-startup

The results go to bench/torchx-startup-results.md, written whole and stamped (``bench/results_file.py``); a run
of fewer than the default runs writes to ``bench/.out`` instead.
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
from pathlib import Path

from local_azure_batch.testing import run_local_batch_service

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_file

RESULTS = Path(__file__).resolve().parent / "torchx-startup-results.md"
DEFAULT_RUNS = 7

TARGET_SECONDS = 1.0


def timed(command: list[str], env: dict[str, str], cwd: str, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return elapsed


def launched(command: list[str], env: dict[str, str], cwd: str) -> str:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()
    python = sys.executable
    torchx = [python, "-m", "torchx.cli.main"]
    with tempfile.TemporaryDirectory() as work, run_local_batch_service(extra_args=["--quiet"]) as batch:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__SECRETS__"))}
        base["AIRFLOW_HOME"] = os.path.join(work, "airflow")
        connection = {
            "conn_type": "azbatch",
            "login": batch.account_name,
            "password": batch.account_key,
            "extra": {"account_url": batch.url},
        }
        by_env = {**base, "AIRFLOW_CONN_AZBATCH_DEFAULT": json.dumps(connection)}
        secrets_file = os.path.join(work, "connections.json")
        Path(secrets_file).write_text(json.dumps({"azbatch_default": connection}), encoding="utf-8")
        by_backend = {
            **base,
            "AIRFLOW__SECRETS__BACKEND": "airflow.secrets.local_filesystem.LocalFilesystemBackend",
            "AIRFLOW__SECRETS__BACKEND_KWARGS": json.dumps({"connections_file_path": secrets_file}),
        }
        by_url = {**base, "AZURE_BATCH_ACCESS_KEY": batch.account_key}
        sleeper = ["--workspace", "", "utils.sh", "sleep", "3600"]
        handle = launched([*torchx, "run", "-s", "azure_batch", *sleeper], by_env, work)
        url_config = os.path.join(work, "by-url")
        os.mkdir(url_config)
        # How a handle naming the account by URL is reached (the local service's name is not its host's).
        Path(url_config, ".torchxconfig").write_text(
            f"[azure_batch]\naccount_url = {batch.url}\naccount_name = {batch.account_name}\n", encoding="utf-8"
        )
        url_handle = launched([*torchx, "run", "-s", "azure_batch", *sleeper], by_url, url_config)
        # local_cwd's `torchx run` waits for its app: it runs beside the measurements.
        local = subprocess.Popen(
            [*torchx, "run", "-s", "local_cwd", "utils.sh", "sleep", "3600"],
            env=base,
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert local.stdout is not None
            local_handle = local.stdout.readline().strip()
            deadline = time.monotonic() + 120
            while (
                "State: RUNNING"
                not in subprocess.run(
                    [*torchx, "status", handle], env=by_env, cwd=work, capture_output=True, text=True
                ).stdout
            ):
                if time.monotonic() > deadline:
                    raise SystemExit("the azure_batch app did not start running within 120 s")
                time.sleep(0.5)
            cases = {
                "`torchx status`, `local_cwd` (TorchX's own)": ([*torchx, "status", local_handle], base, work, (0, 1)),
                "`torchx status`, `azure_batch`, account in `AIRFLOW_CONN_AZBATCH_DEFAULT`": (
                    [*torchx, "status", handle],
                    by_env,
                    work,
                    (0,),
                ),
                "`torchx status`, `azure_batch`, account by URL": (
                    [*torchx, "status", url_handle],
                    by_url,
                    url_config,
                    (0,),
                ),
                "`torchx status`, `azure_batch`, connection in a secrets backend (Airflow imported)": (
                    [*torchx, "status", handle],
                    by_backend,
                    work,
                    (0,),
                ),
            }
            medians: dict[str, float] = {}
            rows = []
            for name, (command, env, cwd, ok) in cases.items():
                timed(command, env, cwd, ok)  # cold: page cache, .pyc
                times = [timed(command, env, cwd, ok) for _ in range(args.runs)]
                medians[name] = statistics.median(times)
                rows.append(f"| {name} | {medians[name]:.2f} | {min(times):.2f} | {max(times):.2f} |")
                print(rows[-1], flush=True)
        finally:
            local.terminate()
            local.wait()
            subprocess.run([*torchx, "cancel", handle], env=by_env, cwd=work, capture_output=True)
            subprocess.run([*torchx, "cancel", url_handle], env=by_url, cwd=url_config, capture_output=True)
    local_median, env_median = list(medians.values())[:2]
    gap = env_median - local_median
    verdict = "met" if gap <= TARGET_SECONDS else "not met"
    summary = (
        f"`azure_batch` (account in `AIRFLOW_CONN_AZBATCH_DEFAULT`) minus `local_cwd`: {gap:+.2f} s "
        f"(target: at most {TARGET_SECONDS:.0f} s more): {verdict}."
    )
    print(summary)
    body = (
        "What each row measures is in `bench/torchx_startup.py`'s docstring: "
        f"{args.runs} warm runs of each command (a cold run dropped first), one app running on each "
        "scheduler, the local Batch service on the same machine. Absolute times vary with the machine's load; "
        "the gap between rows measured together is what counts.\n\n"
        "| command | median (s) | min (s) | max (s) |\n|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"{summary}\n\n"
        "`local_cwd` keeps its apps in the process that ran them: its `status` from another process answers "
        "that the app does not exist (exit 1), after the same start-up, so its row is TorchX's start-up and an "
        "in-memory look-up, the floor of any scheduler's `status`.\n"
    )
    print(results_file.write(RESULTS, started, load_before, body, full=args.runs == DEFAULT_RUNS))
    return 0 if gap <= TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())

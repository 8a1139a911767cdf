"""A whole local Airflow: API server (and UI), scheduler, DAG processor and triggerer, each its own process
group, their output in ``<state dir>/logs/<component>.log``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from airflow_provider_azbatch.devenv.airflow_home import airflow_command
from airflow_provider_azbatch.devenv.errors import DevEnvError
from airflow_provider_azbatch.devenv.processes import ProcessGroups

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
# What /api/v2/monitor/health reports for each component.
HEALTH_PARTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
STARTUP_TIMEOUT_SECONDS = 240.0


def start_airflow(groups: ProcessGroups, env: dict[str, str], api_port: int, logs: Path) -> None:
    """Start the four components and return once the API server reports every one healthy."""
    logs.mkdir(parents=True, exist_ok=True)
    airflow = airflow_command()
    for name in COMPONENTS:
        args = ["api-server", "--port", str(api_port)] if name == "api-server" else [name]
        groups.start(name, [airflow, *args], env=env, log=logs / f"{name}.log")
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while not healthy(api_port):
        check_running(groups, logs)
        if time.monotonic() > deadline:
            raise DevEnvError(f"Airflow was not healthy within {STARTUP_TIMEOUT_SECONDS:.0f} s: see the logs in {logs}")
        time.sleep(0.5)


def check_running(groups: ProcessGroups, logs: Path) -> None:
    """Raise, with the end of its log, if a component has exited."""
    for name, code in groups.exited().items():
        if name in COMPONENTS:
            log = logs / f"{name}.log"
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else ""
            raise DevEnvError(f"the Airflow {name} exited with code {code} ({log}):\n{tail}")


def healthy(api_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/api/v2/monitor/health", timeout=5) as response:
            health = json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return all(health.get(part, {}).get("status") == "healthy" for part in HEALTH_PARTS)

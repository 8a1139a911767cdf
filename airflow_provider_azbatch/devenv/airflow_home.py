"""The Airflow home of the environment: its settings, its ``azbatch_default`` connection, its database."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_azbatch.devenv.errors import DevEnvError
from airflow_provider_azbatch.devenv.processes import ProcessGroups
from airflow_provider_azbatch.devenv.storage import Azurite, free_port

CONNECTION_VARIABLE = "AIRFLOW_CONN_AZBATCH_DEFAULT"


@dataclass(frozen=True)
class BatchEndpoint:
    """The local Batch service as the connection names it (its development account: public on purpose)."""

    url: str
    account_name: str
    account_key: str


def connection_json(batch: BatchEndpoint, storage: Azurite | None) -> str:
    """``azbatch_default`` as an ``AIRFLOW_CONN_...`` value: the local accounts, storage where there is one."""
    extra: dict[str, Any] = {"account_url": batch.url}
    if storage is not None:
        extra.update(storage_account_url=storage.url, storage_account_key=storage.key)
    return json.dumps(
        {"conn_type": "azbatch", "login": batch.account_name, "password": batch.account_key, "extra": extra}
    )


def airflow_settings(home: Path, dags_folder: Path, connection: str, api_port: int | None) -> dict[str, str]:
    """What every Airflow process of the environment (and another shell, from the export lines) needs; with an
    ``api_port``, what a whole deployment needs too.

    Secrets (Fernet key, JWT secret, API secret key) are not among them: ``airflow db migrate`` generates them
    into the home's airflow.cfg, which every process reads, so they survive a restart with ``--persist``."""
    settings = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    if api_port is not None:
        settings.update(_deployment_settings(api_port))
    settings[CONNECTION_VARIABLE] = connection
    return settings


def _deployment_settings(api_port: int) -> dict[str, str]:
    base = f"http://127.0.0.1:{api_port}"
    return {
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # Eight tasks at once: enough for a fan-out, without 32 idle workers (Airflow's default) on a laptop.
        "AIRFLOW__CORE__PARALLELISM": "8",
        # No login: the API server listens on loopback only, for this machine's user (as `astro dev` does).
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        # One API server worker for one user (Airflow's default is four, each a whole Airflow in memory); and no
        # supervisor, whose 5 s start-up ping kills workers still importing Airflow on a busy machine.
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": base,
        # Free ports for the log servers: another Airflow on this machine may hold the defaults (8793, 8794).
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        # A new or edited DAG file shows up within seconds, not Airflow's default five minutes.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
        # Every process of a deployment shares this machine: a slow answer of the API server is not a failure.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
    }


def export_lines(settings: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in settings.items()]


def airflow_command() -> str:
    """The ``airflow`` of this interpreter's environment (the provider is installed beside it)."""
    found = Path(sys.executable).with_name("airflow")
    if not found.exists():
        raise DevEnvError(f"no `airflow` command beside {sys.executable}: install apache-airflow in this environment")
    return str(found)


def migrate(groups: ProcessGroups, env: dict[str, str], home: Path) -> None:
    """``airflow db migrate``: creates the database on the first start, upgrades it on later ones."""
    log = home / "db-migrate.log"
    process = groups.start("db-migrate", [airflow_command(), "db", "migrate"], env=env, log=log)
    code = process.wait()
    groups.stop("db-migrate")
    if code != 0:
        output = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise DevEnvError(f"`airflow db migrate` failed with exit code {code} ({log}):\n{output}")

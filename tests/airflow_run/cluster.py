"""A real Airflow deployment for tests: API server, scheduler, DAG processor and triggerer as processes.

Everything runs on loopback with SQLite and the LocalExecutor, in a throwaway AIRFLOW_HOME. Each
component is its own process group, so a test can stop and restart one (the triggerer) and stopping
the cluster stops everything it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from tests.helpers import wait_until

COMPONENTS = {
    "api-server": ["api-server", "--port", "{port}"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer"],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AirflowCluster:
    def __init__(self, home: Path, dags_folder: Path, extra_env: dict[str, str]) -> None:
        self.home = home
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        bin_dir = str(Path(sys.executable).parent)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                # `airflow` components start children by name: the venv must be on PATH.
                "PATH": f"{bin_dir}:{env.get('PATH', '')}",
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
                "AIRFLOW__API__BASE_URL": self.base,
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API_AUTH__JWT_SECRET": "airflow-run-test-jwt-secret-that-is-long-enough",
                "AIRFLOW__API__SECRET_KEY": "airflow-run-test-secret",
                # Airflow 3.0-3.2 refuse `?deserialize=true` on XCom entries unless this is on.
                "AIRFLOW__API__ENABLE_XCOM_DESERIALIZE_SUPPORT": "True",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
                "PYTHONUNBUFFERED": "1",
                **extra_env,
            }
        )
        self.env = env
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._token: str | None = None

    # -- processes --------------------------------------------------------------------------------------
    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(Path(sys.executable).with_name("airflow")), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        migrated = self.airflow("db", "migrate")
        assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
        for name in COMPONENTS:
            self.start_component(name)
        wait_until(self._healthy, timeout=180, interval=1, what="Airflow components healthy")

    def start_component(self, name: str) -> None:
        args = [arg.format(port=self.port) for arg in COMPONENTS[name]]
        log = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 - kept open for the process's life
        self.processes[name] = subprocess.Popen(
            [str(Path(sys.executable).with_name("airflow")), *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop_component(self, name: str, timeout: float = 60) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # Children (workers, supervisors) of the component's group must not outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    def stop(self) -> None:
        for name in list(self.processes):
            self.stop_component(name)

    def _healthy(self) -> bool:
        try:
            health = self._request("GET", "/api/v2/monitor/health", auth=False)
        except (OSError, urllib.error.URLError):
            return False
        statuses = [
            health.get(part, {}).get("status") for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
        ]
        return all(status == "healthy" for status in statuses)

    # -- REST API ---------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        request = urllib.request.Request(
            self.base + path,
            method=method,
            headers=headers,
            data=json.dumps(body).encode() if body is not None else None,
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def token(self) -> str:
        if self._token is None:
            passwords = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
            request = urllib.request.Request(
                f"{self.base}/auth/token",
                method="POST",
                headers={"Content-Type": "application/json"},
                data=json.dumps({"username": "admin", "password": passwords["admin"]}).encode(),
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                self._token = json.loads(response.read())["access_token"]
        return self._token

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return self._request(method, f"/api/v2{path}", body)

    def wait_for_dag(self, dag_id: str) -> None:
        def parsed() -> bool:
            try:
                self.api("GET", f"/dags/{dag_id}")
            except urllib.error.HTTPError:
                return False
            return True

        wait_until(parsed, timeout=120, interval=1, what=f"DAG {dag_id} parsed")
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        run = self.api("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
        return run["dag_run_id"]

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.task_instance(dag_id, run_id, task_id).get("state")

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def task_log_entries(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> list[dict[str, Any]]:
        """The task's log as the UI receives it: structured entries (event, timestamp, logger...), worker and
        triggerer parts merged."""
        body = self.api(
            "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}?full_content=true"
        )
        return [entry if isinstance(entry, dict) else {"event": str(entry)} for entry in body.get("content", [])]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> list[str]:
        """The task's log as the UI shows it, one message per entry."""
        return [entry.get("event", "") for entry in self.task_log_entries(dag_id, run_id, task_id, try_number)]

    def mark(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        self.api("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}", {"new_state": state})

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """An XCom value as the REST API gives it (deserialized)."""
        entry = self.api(
            "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}?deserialize=true"
        )
        return entry["value"]

"""A real Airflow deployment for tests: API server, scheduler, DAG processor and triggerers as processes.

Everything runs on loopback with the LocalExecutor, in a throwaway AIRFLOW_HOME, on SQLite or the
database given (PostgreSQL for more than one triggerer). Each component is its own process group, so a
test can stop, kill, freeze or restart one (a triggerer) and stopping the cluster stops everything it
started. Triggerers after the first are named ``triggerer-2``, ``triggerer-3``...: the first serves the
triggerers' logs, the others skip serving them, as one port is all the API server knows (all of them write
to the one log folder, which the API server reads too); with ``serve_trigger_logs=False`` none does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from tests.helpers import wait_until

# A component's log line at level warning or above (structlog's console format, or logging's).
_WARNING_OR_ERROR = re.compile(r"\[(warning|error|critical)\s*\]|\b(WARNING|ERROR|CRITICAL)\b")

COMPONENTS = {
    # One worker, no supervisor: uvicorn's (every line's) kills a worker that has not answered its ping 5 s after
    # it was spawned, and four workers importing Airflow at once on two busy cores take longer than that, for ever.
    "api-server": ["api-server", "--port", "{port}", "--workers", "1"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer"],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _command(name: str, serve_trigger_logs: bool) -> list[str]:
    if name.startswith("triggerer-") or (name == "triggerer" and not serve_trigger_logs):
        return [*COMPONENTS["triggerer"], "--skip-serve-logs"]
    return COMPONENTS[name]


class AirflowCluster:
    def __init__(
        self,
        home: Path,
        dags_folder: Path,
        extra_env: dict[str, str],
        *,
        database_url: str | None = None,
        serve_trigger_logs: bool = True,
    ) -> None:
        self.home = home
        self.serve_trigger_logs = serve_trigger_logs
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
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url or f"sqlite:///{home}/airflow.db",
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
        # Triggerer component name -> the id of its job (the ``triggerer_job`` of the tasks it runs).
        self.triggerer_jobs: dict[str, int] = {}
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

    def start(self, triggerers: int = 1) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        migrated = self.airflow("db", "migrate")
        assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
        for name in COMPONENTS:
            self.start_component(name)
        wait_until(self._healthy, timeout=180, interval=1, what="Airflow components healthy")
        # One after the other, so that each triggerer's job is known by the name of its process.
        self.triggerer_jobs["triggerer"] = self._new_triggerer_job(set())
        for number in range(2, triggerers + 1):
            self.start_triggerer(f"triggerer-{number}")

    def start_triggerer(self, name: str) -> int:
        """Start one more triggerer; returns its job id once it heartbeats."""
        known = set(self.running_triggerer_jobs())
        self.start_component(name)
        self.triggerer_jobs[name] = self._new_triggerer_job(known)
        return self.triggerer_jobs[name]

    def running_triggerer_jobs(self) -> list[int]:
        jobs = self.api("GET", "/jobs?job_type=TriggererJob&job_state=running&limit=100")["jobs"]
        return [job["id"] for job in jobs]

    def _new_triggerer_job(self, known: set[int]) -> int:
        def started() -> int | None:
            new = set(self.running_triggerer_jobs()) - known
            assert len(new) <= 1, f"more than one new triggerer job: {new}"
            return new.pop() if new else None

        return wait_until(started, timeout=120, interval=0.5, what="the new triggerer's job")

    def start_component(self, name: str) -> None:
        args = [arg.format(port=self.port) for arg in _command(name, self.serve_trigger_logs)]
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

    def kill_component(self, name: str) -> float:
        """SIGKILL the component's process group (a crash: nothing is cleaned up); returns when (epoch s)."""
        process = self.processes.pop(name)
        killed_at = time.time()
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return killed_at

    def freeze_component(self, name: str) -> float:
        """SIGSTOP the component's process group: alive, but silent (as a stalled host or container)."""
        stopped_at = time.time()
        os.killpg(self.processes[name].pid, signal.SIGSTOP)
        return stopped_at

    def exited(self, name: str) -> bool:
        """Whether the component's process has exited (by itself: a crash, an error it does not survive)."""
        return self.processes[name].poll() is not None

    def thaw_component(self, name: str) -> float:
        thawed_at = time.time()
        os.killpg(self.processes[name].pid, signal.SIGCONT)
        return thawed_at

    def stop(self) -> None:
        for name in list(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.processes[name].pid, signal.SIGCONT)  # a frozen one could not stop
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

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run (mapped ones each with its ``map_index``), with its ``state``, its
        ``trigger`` and the ``triggerer_job`` running it while deferred."""
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=1000")["task_instances"]

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.task_instance(dag_id, run_id, task_id).get("state")

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def wait_for_run_end(self, dag_id: str, run_id: str, timeout: float, interval: float = 1) -> str:
        """The run's end state (``success`` or ``failed``), once it has one."""
        return wait_until(
            lambda: (state := self.run_state(dag_id, run_id)) in ("success", "failed") and state,
            timeout=timeout,
            interval=interval,
            what=f"run {run_id} of {dag_id} to end",
        )

    def wait_for_success(self, dag_id: str, run_id: str, timeout: float, interval: float = 1) -> None:
        """Wait for the run to end; one that did not succeed fails the test with why (``why_failed``)."""
        state = self.wait_for_run_end(dag_id, run_id, timeout, interval)
        assert state == "success", f"run {run_id} of {dag_id} ended {state}\n" + self.why_failed(dag_id, run_id)

    def task_log_entries(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1
    ) -> list[dict[str, Any]]:
        """The task's log as the UI receives it: structured entries (event, timestamp, logger...), worker and
        triggerer parts merged."""
        body = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
            f"?full_content=true&map_index={map_index}",
        )
        return [entry if isinstance(entry, dict) else {"event": str(entry)} for entry in body.get("content", [])]

    def task_log_download(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The task's log as the UI's download button gets it: the whole log streamed as NDJSON, one entry a line
        (events fired by the triggerer included, in full)."""
        request = urllib.request.Request(
            f"{self.base}/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
            "?full_content=true",
            headers={"Accept": "application/x-ndjson", "Authorization": f"Bearer {self.token()}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read().decode()

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1) -> list[str]:
        """The task's log as the UI shows it, one message per entry."""
        entries = self.task_log_entries(dag_id, run_id, task_id, try_number, map_index)
        return [entry.get("event", "") for entry in entries]

    def why_failed(self, dag_id: str, run_id: str, tail: int = 30) -> str:
        """For an assertion's message: the components' warnings and errors about the run, and the end of each of
        its tasks' logs (a run that failed in CI leaves nothing else to read)."""
        parts = []
        for log in sorted(self.home.glob("*.log")):
            lines = [
                line
                for line in log.read_text(errors="replace").splitlines()
                if run_id in line and _WARNING_OR_ERROR.search(line)
            ]
            if lines:
                parts.append(f"--- {log.name} (warnings and errors about the run)\n" + "\n".join(lines[-tail:]))
        try:
            instances = self.task_instances(dag_id, run_id)
        except (OSError, ValueError) as exc:
            instances = []
            parts.append(f"--- task instances not read: {exc}")
        for ti in instances:
            task_id, try_number = ti["task_id"], max(int(ti.get("try_number") or 1), 1)
            try:
                events = self.task_log(dag_id, run_id, task_id, try_number, ti.get("map_index", -1))
            except (OSError, ValueError) as exc:
                events = [f"(not read: {exc})"]
            parts.append(f"--- {task_id} ({ti.get('state')}), its log's last lines\n" + "\n".join(events[-tail:]))
        return "\n".join(parts)

    def trigger_log(self, dag_id: str, run_id: str, task: str, triggerer_job: int) -> Path:
        """The log file one triggerer writes for a task's trigger (``task``: ``task_id`` or
        ``task_id/map_index=N``), as the API server reads it."""
        folder = self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task}"
        return folder / f"attempt=1.log.trigger.{triggerer_job}.log"

    def mark(self, dag_id: str, run_id: str, task_id: str, state: str, map_index: int = -1) -> None:
        instance = f"{task_id}/{map_index}" if map_index >= 0 else task_id
        self.api("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{instance}", {"new_state": state})

    def clear(self, dag_id: str, run_id: str, task_id: str) -> None:
        """Clear one task instance, as the UI's "Clear" does (its next try runs)."""
        body = {"dry_run": False, "task_ids": [task_id], "dag_run_id": run_id, "only_failed": False}
        self.api("POST", f"/dags/{dag_id}/clearTaskInstances", body)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """An XCom value as the REST API gives it (deserialized)."""
        entry = self.api(
            "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}?deserialize=true"
        )
        return entry["value"]

"""``azbatch-dev`` run as a user runs it (a child process in its own session), its output read as it comes,
and a check that nothing it started outlives it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.helpers import wait_until

EXPORT = re.compile(r"^export (\w+)=(.*)$")
UI = re.compile(r"^\s+UI:\s+(http://127\.0\.0\.1:\d+)\s")


class DevEnv:
    def __init__(self, command: str, cwd: Path, bin_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        # Every process the command starts inherits this variable: how the test finds what is left of them.
        self.marker = uuid.uuid4().hex
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update({"AZBATCH_DEV_PORT": "0", **(extra_env or {}), "AZBATCH_DEV_TEST_MARKER": self.marker})
        env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
        argv = shlex.split(command)
        self.process = subprocess.Popen(
            [str(bin_dir / argv[0]), *argv[1:]],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 300) -> None:
        def seen() -> bool:
            assert self.process.poll() is None or text in self.output, f"exited:\n{self.output}"
            return text in self.output

        wait_until(seen, timeout=timeout, interval=0.5, what=f"{text!r} in the output")

    def exports(self) -> dict[str, str]:
        found = {}
        for line in self.lines:
            if match := EXPORT.match(line):
                (value,) = shlex.split(match.group(2))
                found[match.group(1)] = value
        return found

    def ui(self) -> str:
        return next(match.group(1) for line in self.lines if (match := UI.match(line)))

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 120) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        """After a failed test: whatever is left, by its marker."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        for pid in self.leftover_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def leftover_pids(self) -> list[int]:
        """Processes whose environment holds this run's marker."""
        needle = f"AZBATCH_DEV_TEST_MARKER={self.marker}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry.name))
        return found

    def ports(self) -> list[int]:
        """Every port the environment listened on: the API server, the log servers, Batch, Azurite."""
        exports = self.exports()
        ports = [int(exports[name]) for name in exports if name.endswith("_PORT")]
        connection = json.loads(exports["AIRFLOW_CONN_AZBATCH_DEFAULT"])
        for url in (connection["extra"]["account_url"], connection["extra"].get("storage_account_url")):
            if url:
                ports.append(urllib.parse.urlsplit(url).port or 0)
        return ports


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Api:
    """The environment's REST API, as the UI calls it (no login: a token for the asking)."""

    def __init__(self, base: str) -> None:
        self.base = base
        with urllib.request.urlopen(f"{base}/auth/token", timeout=30) as response:
            self.token = json.loads(response.read())["access_token"]

    def __call__(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.base}/api/v2{path}",
            method=method,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
            data=json.dumps(body).encode() if body is not None else None,
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def log(self, dag_id: str, run_id: str, task_id: str) -> list[str]:
        body = self(
            "GET",
            f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/{task_id}/logs/1?full_content=true",
        )
        return [entry.get("event", "") if isinstance(entry, dict) else str(entry) for entry in body["content"]]

"""The environment's processes, each in its own process group, so that stopping one stops all it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from airflow_provider_azbatch.devenv.stopping import signals_deferred


class ProcessGroups:
    """Children started in new sessions (the terminal's Ctrl-C reaches only this process), stopped together."""

    def __init__(self) -> None:
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[object] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        log: Path | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv``; its output goes to ``log`` (appended) or, without one, to this process's."""
        with signals_deferred():
            output = open(log, "ab") if log is not None else None  # noqa: SIM115 - closed by stop_all
            if output is not None:
                self._logs.append(output)
            process = subprocess.Popen(
                list(argv),
                env=env,
                cwd=cwd,
                stdout=output,
                stderr=subprocess.STDOUT if output is not None else None,
                start_new_session=True,
            )
            self.processes[name] = process
        return process

    def exited(self) -> dict[str, int]:
        """The children that are no longer running, with their exit codes."""
        return {name: code for name, process in self.processes.items() if (code := process.poll()) is not None}

    def stop(self, name: str, timeout: float = 15.0) -> None:
        process = self.processes.pop(name, None)
        if process is not None:
            _stop_group(process, timeout)

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every group at once, then SIGKILL what is left of each after ``timeout`` seconds (a triggerer
        may take longer to stop by itself: the next one resumes its triggers)."""
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            _stop_group(process, max(0.0, deadline - time.monotonic()))
        self.processes.clear()
        for output in self._logs:
            output.close()  # type: ignore[attr-defined]
        self._logs.clear()


def _stop_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    # Whatever the group's leader left behind (workers, task supervisors) must not outlive it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()

"""Runs task command lines as real processes, the way a Linux compute node does.

As on a node, a command line does not run under a shell: it is split into a program and its arguments
(POSIX quoting, no variable expansion, no ``;``, pipes or redirections) and the program is executed
directly. A command that wants shell features invokes one: ``/bin/sh -c 'echo $AZ_BATCH_TASK_ID'``.
Each run is in its own session (so a kill reaches every process the command started), with stdout and
stderr going straight to files: a client reading those files sees output as soon as the process writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from local_azure_batch.model.clock import utcnow

# Grace between SIGTERM and SIGKILL when a task is terminated or hits its wall clock.
KILL_GRACE_SECONDS = 2.0

EndedBy = Literal["exit", "wall_clock", "terminated", "launch_failed"]

# Linux does not report a file's birth time portably; the runner remembers when it (re)created the
# output files so the files API can report ``ocp-creation-time`` that changes when a retry starts afresh.
CREATION_TIMES: dict[str, float] = {}


def creation_time(path: str, st: os.stat_result) -> float:
    return CREATION_TIMES.get(path, min(st.st_mtime, st.st_ctime))


def _fresh(path: Path) -> None:
    """A retry writes new output files, as on a node."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    CREATION_TIMES[str(path)] = time.time()


def command_arguments(command_line: str) -> list[str]:
    """The program and arguments a command line names, split without a shell as the Linux node agent does.

    Quotes group words and backslashes escape, as in a POSIX shell; nothing else is interpreted: ``$HOME``,
    ``;``, ``|``, ``>`` and ``#`` are ordinary characters. Raises ValueError for an unclosed quote or an
    empty command line.
    """
    arguments = shlex.split(command_line, posix=True)
    if not arguments:
        raise ValueError("the command line names no program")
    return arguments


def _launch_error(program: str, exc: OSError) -> str:
    return f"{program}: {exc.strerror or exc}"


@dataclass
class ProcessSpec:
    command_line: str
    cwd: Path
    env: dict[str, str]
    stdout: Path
    stderr: Path
    wall_clock_seconds: float | None = None
    stderr_preamble: str | None = None
    # Add to the output files instead of starting them afresh (a multi-instance primary's application
    # command writes after its coordination command).
    append: bool = False


@dataclass
class ProcessOutcome:
    exit_code: int | None
    ended_by: EndedBy
    start_time: datetime
    end_time: datetime
    error: str | None = None


@dataclass(eq=False)
class RunHandle:
    """What the service holds on to while a process runs, to terminate it."""

    process: asyncio.subprocess.Process | None = None
    terminate_requested: bool = False
    started: asyncio.Event = field(default_factory=asyncio.Event)


class ProcessRunner:
    def __init__(self) -> None:
        self._handles: set[RunHandle] = set()
        # Process groups ever started: a command may leave background children behind.
        self._groups: set[int] = set()

    async def run(
        self, spec: ProcessSpec, handle: RunHandle, on_started: Callable[[], None] | None = None
    ) -> ProcessOutcome:
        spec.cwd.mkdir(parents=True, exist_ok=True)
        start = utcnow()
        self._handles.add(handle)
        try:
            if not spec.append:
                _fresh(spec.stdout)
                _fresh(spec.stderr)
            mode = "ab" if spec.append else "wb"
            with open(spec.stdout, mode, buffering=0) as out, open(spec.stderr, mode, buffering=0) as err:
                if spec.stderr_preamble:
                    err.write(spec.stderr_preamble.encode())
                if handle.terminate_requested:
                    return ProcessOutcome(None, "terminated", start, utcnow())
                try:
                    arguments = command_arguments(spec.command_line)
                except ValueError as exc:
                    return ProcessOutcome(None, "launch_failed", start, utcnow(), error=f"{exc}: {spec.command_line}")
                try:
                    process = await asyncio.create_subprocess_exec(
                        *arguments,
                        cwd=spec.cwd,
                        env=spec.env,
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,
                    )
                except OSError as exc:  # not found, not executable, not a program (no #! line)
                    error = _launch_error(arguments[0], exc)
                    return ProcessOutcome(None, "launch_failed", start, utcnow(), error=error)
                handle.process = process
                self._groups.add(process.pid)
                if handle.terminate_requested:  # asked for while the process was being started
                    await self._kill(process)
                handle.started.set()
                if on_started is not None:
                    on_started()
                ended_by: EndedBy = "exit"
                try:
                    await asyncio.wait_for(asyncio.shield(process.wait()), spec.wall_clock_seconds)
                except asyncio.TimeoutError:
                    ended_by = "wall_clock"
                    await self._kill(process)
                if handle.terminate_requested and ended_by == "exit":
                    ended_by = "terminated"
                return ProcessOutcome(_exit_code(process.returncode), ended_by, start, utcnow())
        finally:
            self._handles.discard(handle)

    async def terminate(self, handle: RunHandle) -> None:
        handle.terminate_requested = True
        if handle.process is not None and handle.process.returncode is None:
            await self._kill(handle.process)

    def end_session(self, handle: RunHandle) -> None:
        """Kill whatever the handle's last command left running in its session (background services)."""
        if handle.process is not None:
            _signal_group(handle.process, signal.SIGKILL)

    async def _kill(self, process: asyncio.subprocess.Process) -> None:
        _signal_group(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), KILL_GRACE_SECONDS)
        except asyncio.TimeoutError:
            _signal_group(process, signal.SIGKILL)
            await process.wait()
        # The program may be gone while something it started lingers in the session.
        _signal_group(process, signal.SIGKILL)

    async def shutdown(self) -> None:
        """Kill every process this runner started, and wait for them."""
        handles = list(self._handles)
        for handle in handles:
            handle.terminate_requested = True
            if handle.process is not None:
                _signal_group(handle.process, signal.SIGKILL)
        for handle in handles:
            if handle.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    await handle.process.wait()
        for group in self._groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        self._groups.clear()


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _exit_code(returncode: int | None) -> int | None:
    if returncode is None:
        return None
    # A signal death is reported as 128 + the signal's number, as the node reports it (SIGKILL → 137).
    return 128 - returncode if returncode < 0 else returncode

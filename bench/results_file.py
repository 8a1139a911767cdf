"""The one writer of the benchmarks' results files (``bench/results.md``, ``view-results.md``,
``output-results.md``): a file is written whole by one full run, stamped with what it was measured on.

Never merged by hand, never written by a partial run (``--only``, ``--quick``): those go to ``bench/.out``.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit() -> str:
    """The commit measured (``+changes``: with uncommitted changes to the code measured)."""
    head = _git("rev-parse", "--short=10", "HEAD") or "unknown"
    changed = _git("status", "--porcelain", "--", "airflow_provider_azbatch", "bench/*.py")
    return head + (" +changes" if changed else "")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def stamp(started: float, load: tuple[float, float, float]) -> str:
    """Where, when and how the numbers below were measured."""
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    return (
        f"Measured {when} at commit `{commit()}` on {cpu_name()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; 1-minute load when the run started "
        f"{load[0]:.1f} (other work shares these cores). Command: `{command}`."
    )


def write(path: Path, started: float, load: tuple[float, float, float], body: str, full: bool) -> Path:
    """Write ``body`` under the stamp: to ``path`` after a full run, else beside it in ``bench/.out``."""
    target = path if full else HERE / ".out" / f"{path.stem}-partial.md"
    target.parent.mkdir(exist_ok=True)
    target.write_text(stamp(started, load) + "\n\n" + body.rstrip() + "\n")
    return target

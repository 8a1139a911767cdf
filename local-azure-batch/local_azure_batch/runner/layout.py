"""Where a simulated compute node keeps its files, laid out like a Linux Batch node.

``<task root>/pools/<pool>/<node>/`` is the node's ``AZ_BATCH_NODE_ROOT_DIR``; a task runs in
``workitems/<job>/job-1/<task>/wd`` beside its ``stdout.txt`` and ``stderr.txt``. The node agent's own logs are in
``<task root>/pools/<pool>/<node>.agent/``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

NODE_SUBDIRS = ("applications", "fsmounts", "shared", "startup", "volatile", "workitems")


@dataclass(frozen=True)
class NodeDirs:
    root: Path

    @classmethod
    def for_node(cls, task_root: Path, pool_id: str, node_id: str) -> NodeDirs:
        return cls(task_root / "pools" / pool_id / node_id)

    def create(self) -> None:
        for sub in NODE_SUBDIRS:
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.agent_logs, ignore_errors=True)

    @property
    def agent_logs(self) -> Path:
        """Where the node's Batch agent keeps its own logs: beside the node's directory, not in it (tasks and
        the node files API do not see them; ``uploadbatchservicelogs`` uploads them). They go with the node."""
        return self.root.with_name(f"{self.root.name}.agent")

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    @property
    def startup(self) -> Path:
        return self.root / "startup"

    @property
    def mounts(self) -> Path:
        """``AZ_BATCH_NODE_MOUNTS_DIR``: where the pool's file systems are mounted."""
        return self.root / "fsmounts"

    def job_dir(self, job_id: str) -> Path:
        return self.root / "workitems" / job_id / "job-1"

    def task_dir(self, job_id: str, task_id: str) -> Path:
        return self.job_dir(job_id) / task_id

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

"""What the parts of the service model share: its state, settings and background work."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local_azure_batch.runner.environment import task_environment
from local_azure_batch.runner.process import ProcessSpec

if TYPE_CHECKING:
    from local_azure_batch.model.jobs import Job
    from local_azure_batch.model.pools import ComputeNode, Pool
    from local_azure_batch.model.service import ServiceSettings
    from local_azure_batch.model.tasks import Task
    from local_azure_batch.runner.process import ProcessRunner
    from local_azure_batch.runner.transfers import TransferAgent


class ServiceBase:
    """The account state the operation mixins (pools, jobs, tasks, execution) work on."""

    settings: ServiceSettings
    runner: ProcessRunner
    transfers: TransferAgent
    pools: dict[str, Pool]
    jobs: dict[str, Job]
    _closing: bool

    @property
    def base_url(self) -> str:
        return self.settings.account_url

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        raise NotImplementedError

    def kick(self) -> None:
        raise NotImplementedError

    def _node_process(
        self,
        node: ComputeNode,
        *,
        job_id: str | None,
        task_id: str,
        task_dir: Path,
        command_line: str,
        settings: Iterable[Mapping[str, str]] = (),
        extra: Mapping[str, str] | None = None,
        wall_clock_seconds: float | None = None,
        stderr_preamble: str | None = None,
        append: bool = False,
    ) -> ProcessSpec:
        """A command on ``node`` as the node agent runs one: in ``task_dir/wd``, output beside it, with
        the AZ_BATCH_* environment (tasks, start tasks, job preparation and release tasks alike)."""
        return ProcessSpec(
            command_line=command_line,
            cwd=task_dir / "wd",
            env=task_environment(
                account_name=self.settings.account_name,
                account_url=self.base_url,
                pool_id=node.pool.id,
                node_id=node.id,
                node=node.dirs,
                job_id=job_id,
                task_id=task_id,
                task_dir=task_dir,
                is_dedicated=node.is_dedicated,
                user_settings=settings,
                extra=extra,
            ),
            stdout=task_dir / "stdout.txt",
            stderr=task_dir / "stderr.txt",
            wall_clock_seconds=wall_clock_seconds,
            stderr_preamble=stderr_preamble,
            append=append,
        )

    def _launch_multi_instance(self, task: Task, nodes: list[ComputeNode]) -> None:
        """Start a multi-instance task on its nodes (model.multi_instance)."""
        raise NotImplementedError

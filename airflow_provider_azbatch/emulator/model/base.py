"""What the parts of the service model share: its state, settings and background work."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_azbatch.emulator.model.jobs import Job
    from airflow_provider_azbatch.emulator.model.pools import ComputeNode, Pool
    from airflow_provider_azbatch.emulator.model.service import ServiceSettings
    from airflow_provider_azbatch.emulator.model.tasks import Task
    from airflow_provider_azbatch.emulator.runner.process import ProcessRunner
    from airflow_provider_azbatch.emulator.runner.transfers import TransferAgent


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

    def _launch_multi_instance(self, task: Task, nodes: list[ComputeNode]) -> None:
        """Start a multi-instance task on its nodes (model.multi_instance)."""
        raise NotImplementedError

"""What every node of a pool the provider creates runs when it joins the pool, before any task.

A start task installs what the tasks need (packages, drivers, a mount of a data disk), so on pools the provider
creates it runs **as an administrator** by default (the pool's automatic user, elevated): Batch would otherwise
run it as a non-administrator, and ``apt-get install`` or a driver install would fail. Give
``StartTask(command, run_as="nonadmin")`` to run it without elevation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.specs import validation
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.shell import shell_command


@dataclass(frozen=True)
class StartTask:
    """``StartTask("apt-get update && apt-get install -y ffmpeg")``: a shell command every node runs first.

    :param command: handed to ``/bin/sh -c`` like a task's command.
    :param run_as: who runs it: ``"admin"`` (the default), ``"nonadmin"``, a ``RunAs``.
    :param environment: environment variables it sees.
    :param max_retries: how often a failed start task is retried on its node.
    :param wait_for_success: nodes run tasks only once it succeeded (a node whose start task failed is
        ``starttaskfailed`` and runs none; the operator reports it with the start task's stderr).
    """

    command: str
    run_as: Any = "admin"
    environment: Mapping[str, str] = field(default_factory=dict)
    max_retries: int = 1
    wait_for_success: bool = True

    def __post_init__(self) -> None:
        try:
            validation.command_line(self.command, "start_task.command")
            run_as = RunAs.parse(self.run_as, "start_task.run_as")
            object.__setattr__(self, "environment", validation.environment(self.environment, "start_task.environment"))
            validation.retries(self.max_retries, "start_task.max_retries")
        except AzureBatchValidationError as exc:
            raise PoolStrategyError(str(exc)) from None
        object.__setattr__(self, "run_as", run_as)
        if not isinstance(self.wait_for_success, bool):
            raise PoolStrategyError(f"start_task.wait_for_success must be True or False, got {self.wait_for_success!r}")

    @classmethod
    def parse(cls, value: Any) -> StartTask | None:
        """``None``, a command (run as an administrator) or a StartTask."""
        if value is None or isinstance(value, StartTask):
            return value
        if isinstance(value, str):
            return cls(value)
        raise PoolStrategyError(
            f"start_task must be a shell command or a StartTask, got {type(value).__name__} {value!r}"
        )

    def to_rest(self) -> dict[str, Any]:
        """The pool's ``startTask``."""
        assert isinstance(self.run_as, RunAs)
        body: dict[str, Any] = {
            # A shell command, like a task's: the node runs a start task's command line without a shell.
            "commandLine": shell_command(self.command),
            "userIdentity": self.run_as.to_rest(),
            "waitForSuccess": self.wait_for_success,
            "maxTaskRetryCount": self.max_retries,
        }
        if self.environment:
            body["environmentSettings"] = [{"name": k, "value": v} for k, v in self.environment.items()]
        return body

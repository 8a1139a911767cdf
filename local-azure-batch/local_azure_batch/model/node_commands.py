"""A command on a node as the node agent runs one: in ``task_dir/wd``, its output beside it, with the AZ_BATCH_*
environment. Tasks, start tasks, job preparation and release tasks all run this way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from local_azure_batch.runner.environment import task_environment
from local_azure_batch.runner.process import ProcessSpec

from .account import Account
from .identity import identity_variables
from .pools import ComputeNode


def node_process(
    account: Account,
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
    identity: Mapping[str, Any] | None = None,
) -> ProcessSpec:
    """``identity``: the task (or start, preparation, release task) whose ``userIdentity`` the command runs as."""
    return ProcessSpec(
        command_line=command_line,
        cwd=task_dir / "wd",
        env=task_environment(
            account_name=account.settings.account_name,
            account_url=account.base_url,
            pool_id=node.pool.id,
            node_id=node.id,
            node=node.dirs,
            job_id=job_id,
            task_id=task_id,
            task_dir=task_dir,
            is_dedicated=node.is_dedicated,
            user_settings=settings,
            extra={**identity_variables(identity or {}), **(extra or {})},
        ),
        stdout=task_dir / "stdout.txt",
        stderr=task_dir / "stderr.txt",
        wall_clock_seconds=wall_clock_seconds,
        stderr_preamble=stderr_preamble,
        append=append,
    )

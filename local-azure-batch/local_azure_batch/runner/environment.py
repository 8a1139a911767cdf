"""The environment a task process sees: the ``AZ_BATCH_*`` variables the service sets."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .layout import NodeDirs

# A real node starts tasks with a clean environment; these few host settings are kept so that
# commands find the same tools a developer has on PATH.
_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT")

# The port the docs show in AZ_BATCH_MASTER_NODE; it belongs to the service, not to MPI traffic.
MASTER_NODE_PORT = 6000


def task_environment(
    *,
    account_name: str,
    account_url: str,
    pool_id: str,
    node_id: str,
    node: NodeDirs,
    job_id: str | None,
    task_id: str,
    task_dir: Path,
    is_dedicated: bool,
    user_settings: Iterable[Mapping[str, str]] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    env = {name: os.environ[name] for name in _PASSTHROUGH if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = str(task_dir / "wd")
    env.update(
        {
            "AZ_BATCH_ACCOUNT_NAME": account_name,
            "AZ_BATCH_ACCOUNT_URL": account_url,
            "AZ_BATCH_POOL_ID": pool_id,
            "AZ_BATCH_NODE_ID": node_id,
            "AZ_BATCH_NODE_IS_DEDICATED": "true" if is_dedicated else "false",
            "AZ_BATCH_NODE_ROOT_DIR": str(node.root),
            "AZ_BATCH_NODE_SHARED_DIR": str(node.shared),
            "AZ_BATCH_NODE_STARTUP_DIR": str(node.startup),
            "AZ_BATCH_NODE_MOUNTS_DIR": str(node.mounts),
            "AZ_BATCH_TASK_ID": task_id,
            "AZ_BATCH_TASK_DIR": str(task_dir),
            "AZ_BATCH_TASK_WORKING_DIR": str(task_dir / "wd"),
            "AZ_BATCH_TASK_USER": "_azbatch",
            "AZ_BATCH_TASK_USER_IDENTITY": "PoolNonAdmin",
        }
    )
    if job_id is not None:
        env["AZ_BATCH_JOB_ID"] = job_id
    if extra:
        env.update(extra)
    for setting in user_settings:
        env[setting["name"]] = setting.get("value") or ""
    return env


def multi_instance_environment(
    host_ips: Sequence[str], instance_id: int, shared_dir: Path, *, primary_last: bool = False
) -> dict[str, str]:
    """What every instance of a multi-instance task sees besides the usual variables. ``host_ips``: the
    instances' nodes, the primary's first; the lists name it first too, or last with ``primary_last``."""
    listed = [*host_ips[1:], host_ips[0]] if primary_last else list(host_ips)
    return {
        "AZ_BATCH_HOST_LIST": ",".join(listed),
        "AZ_BATCH_NODE_LIST": ";".join(listed),
        "AZ_BATCH_MASTER_NODE": f"{host_ips[0]}:{MASTER_NODE_PORT}",
        "AZ_BATCH_IS_CURRENT_NODE_MASTER": "true" if instance_id == 0 else "false",
        "AZ_BATCH_TASK_SHARED_DIR": str(shared_dir),
        # "<count> <ip> <cores> ...": simulated nodes report one core each.
        "CCP_NODES": " ".join([str(len(listed)), *(f"{ip} 1" for ip in listed)]),
    }

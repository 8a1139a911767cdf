"""How the scheduler's jobs are named and tagged (no Airflow here: the scheduler reads these before it knows
the account)."""

from __future__ import annotations

import getpass
import json
from collections.abc import Mapping

# Every job of this scheduler: `torchx list` asks the service for ids starting with it.
JOB_ID_PREFIX = "torchx-"
# Job metadata: the app's name, and its roles (name, task id, replicas, entrypoint) for describe.
APP_METADATA_KEY = "torchx-app"
ROLES_METADATA_KEY = "torchx-roles"
# Job metadata: who submitted the app (`torchx list` shows one user's apps).
USER_METADATA_KEY = "torchx-user"
# An app whose roles run on pools of different VM sizes is a Batch job per pool: the first (whose id is the
# app's) lists the others' ids; each other one names the first (`torchx list` shows the first only). A role's
# entry in the roles metadata then ends with the id of its job.
JOBS_METADATA_KEY = "torchx-jobs"
PART_OF_METADATA_KEY = "torchx-part-of"
# `-cfg user=*`: every user's apps.
ALL_USERS = "*"


def current_user() -> str:
    """The login name of who runs this process (``unknown`` where the system has none for it)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no USER/LOGNAME and no passwd entry (some containers)
        return "unknown"


def roles_of(metadata: Mapping[str, str]) -> list[tuple[str, str, int, str]]:
    """(role name, task id, replicas, entrypoint) of each role, from the job's metadata."""
    return [(name, task_id, replicas, entrypoint) for name, task_id, replicas, entrypoint, _ in role_jobs_of(metadata)]


def role_jobs_of(metadata: Mapping[str, str]) -> list[tuple[str, str, int, str, str | None]]:
    """(role name, task id, replicas, entrypoint, its job's id: None for the job of the metadata) of each role."""
    try:
        entries = json.loads(metadata.get(ROLES_METADATA_KEY, "[]"))
        return [
            (str(entry[0]), str(entry[1]), int(entry[2]), str(entry[3]), str(entry[4]) if len(entry) > 4 else None)
            for entry in entries
        ]
    except (ValueError, TypeError, IndexError, KeyError):
        return []


def other_jobs_of(metadata: Mapping[str, str]) -> list[str]:
    """The ids of the app's other jobs (its roles on pools of other VM sizes), from its first job's metadata."""
    try:
        return [str(job_id) for job_id in json.loads(metadata.get(JOBS_METADATA_KEY, "[]"))]
    except (ValueError, TypeError):
        return []

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
    try:
        return [(str(n), str(t), int(r), str(e)) for n, t, r, e in json.loads(metadata.get(ROLES_METADATA_KEY, "[]"))]
    except (ValueError, TypeError):
        return []

"""How the scheduler's jobs are named and tagged (no Airflow here: the scheduler reads these before it knows
the account)."""

from __future__ import annotations

import json
from collections.abc import Mapping

# Every job of this scheduler: `torchx list` asks the service for ids starting with it.
JOB_ID_PREFIX = "torchx-"
# Job metadata: the app's name, and its roles (name, task id, replicas, entrypoint) for describe.
APP_METADATA_KEY = "torchx-app"
ROLES_METADATA_KEY = "torchx-roles"


def roles_of(metadata: Mapping[str, str]) -> list[tuple[str, str, int, str]]:
    """(role name, task id, replicas, entrypoint) of each role, from the job's metadata."""
    try:
        return [(str(n), str(t), int(r), str(e)) for n, t, r, e in json.loads(metadata.get(ROLES_METADATA_KEY, "[]"))]
    except (ValueError, TypeError):
        return []

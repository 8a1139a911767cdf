"""A preflight in Python, e.g. in a deployment script before DAG files are shipped (docs/howto/check.md).

tests/preflight/test_check.py calls ``ready`` against the local Batch service.
"""

from __future__ import annotations

# [START howto_preflight]
from airflow_provider_azbatch.preflight import Status, check


def ready(conn_id: str, dag_file: str) -> bool:
    """Whether the connection's account can run the DAG file's Batch tasks; prints what is not ok and its fix."""
    report = check(conn_id, dag_file=dag_file)
    for finding in report.findings:
        if finding.status is not Status.OK:
            print(f"{finding.status.value}: {finding.check}: {finding.detail}")
            print(f"    fix: {finding.fix}")
    return report.ok


# [END howto_preflight]

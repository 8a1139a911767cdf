"""A preflight of an ``azbatch`` connection against its Batch account, before the first DAG run::

    from airflow_provider_azbatch.preflight import check

    report = check("azbatch_prod", dag_file="dags/nightly.py")
    for finding in report.findings:
        print(finding.status.value, finding.check, finding.detail, finding.fix or "")
    assert report.ok

The same as ``airflow azbatch check`` (Airflow 3.2+) and ``python -m airflow_provider_azbatch.preflight`` (every
line): authentication and who the connection is, the data-plane permissions a run needs (a throw-away job
created and deleted), the storage account (a container, a blob, a SAS the credential signs), and for a DAG file
or ``BatchPool`` values: each pool's image and VM size offered and the account's vCPU quota for its family.
"""

from airflow_provider_azbatch.preflight.report import Finding, Identity, PreflightReport, Status
from airflow_provider_azbatch.preflight.run import check

__all__ = ["Finding", "Identity", "PreflightReport", "Status", "check"]

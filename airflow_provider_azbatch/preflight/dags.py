"""The DAGs the check reads: one file (``--dag-file``), or the DAGs folder the DAG processor reads (Airflow's
``[core] dags_folder``, with its ``.airflowignore`` and ``[core] dag_discovery_safe_mode``), parsed as Airflow
parses them; their Batch tasks' pools and storage needs become what the check checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow_provider_azbatch.preflight.report import PreflightReport, failed, ok, warning
from airflow_provider_azbatch.preflight.targets import Targets, targets_of_dags

DAG_FILE = "dag_file"
DAGS_FOLDER = "dags_folder"
BATCH_TASK_KINDS = "AzureBatchJobOperator, @task.azure_batch, AzureBatchTorchXOperator"


def configured_dags_folder() -> str:
    """Airflow's ``[core] dags_folder``, as the DAG processor reads it."""
    from airflow.configuration import conf

    return str(Path(conf.get("core", "dags_folder")).expanduser())


def targets_of_file(report: PreflightReport, path: Path, dag_ids: Sequence[str]) -> Targets | None:
    """The Batch tasks of one DAG file; None (with a failed line) when it cannot be read."""
    from airflow_provider_azbatch.compat import dags_in_file

    if not path.is_file():
        report.add(failed(DAG_FILE, f"there is no file {path}", fix="give the path of a DAG file (--dag-file)"))
        return None
    dags, errors = dags_in_file(str(path))
    if errors:
        report.add(
            failed(
                DAG_FILE,
                f"{path} does not import: {_last_line(next(iter(errors.values())))}",
                fix=f"fix the DAG file (python {path} shows the whole error), then check again",
            )
        )
        return None
    return _chosen(
        report, DAG_FILE, str(path), dags, dag_ids, fix="give the DAG file whose Batch tasks should be checked"
    )


def targets_of_folder(report: PreflightReport, folder: Path, dag_ids: Sequence[str]) -> Targets | None:
    """The Batch tasks of every DAG of the DAGs folder; None when it cannot be read."""
    from airflow.configuration import conf

    from airflow_provider_azbatch.compat import dags_in_file

    if not folder.is_dir():
        report.add(
            warning(
                DAGS_FOLDER,
                f"the DAGs folder {folder} does not exist: no DAG was checked",
                fix="set [core] dags_folder (AIRFLOW__CORE__DAGS_FOLDER) to where the DAGs are, or give --dag-file",
            )
        )
        return None
    dags, errors = dags_in_file(str(folder), safe_mode=conf.getboolean("core", "dag_discovery_safe_mode"))
    if errors:
        first, error = next(iter(sorted(errors.items())))
        others = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        report.add(
            failed(
                DAGS_FOLDER,
                f"{first} does not import{others}: {_last_line(error)}; its DAGs were not checked",
                fix=f"fix the DAG file (python {first} shows the whole error; airflow dags list-import-errors lists "
                "every file), then check again",
            )
        )
    return _chosen(report, DAGS_FOLDER, str(folder), dags, dag_ids, fix="")


def _chosen(
    report: PreflightReport, check: str, where: str, dags: dict[str, Any], dag_ids: Sequence[str], *, fix: str
) -> Targets | None:
    missing = sorted(set(dag_ids) - set(dags))
    if missing:
        report.add(
            failed(
                check,
                f"{where} defines no DAG {', '.join(missing)} (it defines {', '.join(sorted(dags)) or 'none'})",
                fix="name a DAG it defines (--dag-id), or leave --dag-id out to check them all",
            )
        )
        return None
    chosen = [dags[dag_id] for dag_id in sorted(dags) if not dag_ids or dag_id in dag_ids]
    found = targets_of_dags(chosen)
    if found.batch_tasks:
        in_dags = f" in {len(chosen)} DAG(s)" if check == DAGS_FOLDER else ""
        report.add(
            ok(check, f"{where}: {found.batch_tasks} Batch task(s){in_dags}, {len(found.pools)} pool(s) to check")
        )
    elif fix:
        report.add(warning(check, f"{where} has no Batch task ({BATCH_TASK_KINDS})", fix=fix))
    else:
        report.add(ok(check, f"{where}: {len(chosen)} DAG(s), no Batch task ({BATCH_TASK_KINDS}): no pool to check"))
    return found


def _last_line(error: str) -> str:
    lines = error.strip().splitlines()
    return lines[-1] if lines else "an import error"

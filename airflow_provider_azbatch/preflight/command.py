"""``airflow azbatch check``: the preflight of a connection, printed (the command group in ``cli/definition.py``
names it by its path). With no --dag-file, --requirements or --vm-size it checks the DAGs folder's Batch tasks
(``[core] dags_folder``), unless --no-dags.

Exit codes: 0 ready; 1 something a run needs is missing (with ``--strict``, also something that could not be
read); 2 wrong arguments.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from argparse import Namespace
from collections.abc import Iterator
from typing import Any

from airflow_provider_azbatch.cli.command import EXIT_USAGE, fail


def check_command(args: Namespace) -> None:
    from airflow_provider_azbatch.compat import redirect_stdout_log_handlers_to_stderr
    from airflow_provider_azbatch.preflight import check
    from airflow_provider_azbatch.preflight.render import render_text

    # stdout is the report (text, or JSON for a script): log lines go to stderr.
    redirect_stdout_log_handlers_to_stderr()
    pools = _pools(args)
    dags_folder = None
    if args.dag_file is None and not pools and not args.no_dags:
        from airflow_provider_azbatch.preflight.dags import configured_dags_folder

        dags_folder = configured_dags_folder()
    # Parsing a DAG file logs through Airflow's own loggers, some of which print to stdout whatever its handlers.
    with _stdout_to_stderr():
        report = check(
            args.conn_id,
            dag_file=args.dag_file,
            dags_folder=dags_folder,
            dag_ids=args.dag_id or (),
            pools=pools,
            require_storage=args.require_storage,
            management_credential=args.management_credential,
        )
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render_text(report, strict=args.strict))
    sys.stdout.flush()
    code = report.exit_code(strict=args.strict)
    if code:
        raise SystemExit(code)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Whatever is written to file descriptor 1 goes to 2 meanwhile (stdout is the report's alone)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # and writers that look sys.stdout up when they write
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _pools(args: Namespace) -> dict[str, Any]:
    """The pool of ``--requirements``/``--vm-size``/``--max-nodes``, if given."""
    if args.requirements is None and args.vm_size is None:
        return {}
    from airflow_provider_azbatch.pools import BatchPool, PoolStrategyError

    requirements = None
    if args.requirements is not None:
        try:
            requirements = json.loads(args.requirements)
        except json.JSONDecodeError as exc:
            fail(f'--requirements is not JSON ({exc.msg}): give e.g. \'{{"cpus": 4, "memory": "16Gi"}}\'', EXIT_USAGE)
        if not isinstance(requirements, dict):
            fail('--requirements must be a JSON object, e.g. \'{"gpus": 1, "gpu_kind": "T4"}\'', EXIT_USAGE)
    try:
        pool = BatchPool.auto(requirements, vm_size=args.vm_size, max_nodes=args.max_nodes)
    except PoolStrategyError as exc:
        fail(f"--requirements/--vm-size: {exc}", EXIT_USAGE)
    return {"--requirements" if args.requirements is not None else "--vm-size": pool}

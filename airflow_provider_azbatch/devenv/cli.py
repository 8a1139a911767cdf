"""``azbatch-dev start [DAGS_FOLDER]`` and ``azbatch-dev test DAG_ID [DAGS_FOLDER]``.

Ctrl-C (SIGINT) or SIGTERM stops everything the command started: the Airflow components, the local Batch
service and the tasks it runs, Azurite. Each runs in its own process group, stopped with SIGTERM and, what is
left of it after 10 s, SIGKILL.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_azbatch.devenv import stopping
from airflow_provider_azbatch.devenv.airflow_home import (
    BatchEndpoint,
    airflow_command,
    airflow_settings,
    connection_json,
    export_lines,
    migrate,
)
from airflow_provider_azbatch.devenv.deployment import COMPONENTS, check_running, start_airflow
from airflow_provider_azbatch.devenv.errors import DevEnvError
from airflow_provider_azbatch.devenv.processes import ProcessGroups
from airflow_provider_azbatch.devenv.stopping import Stopped, signals_deferred
from airflow_provider_azbatch.devenv.storage import (
    NEEDS_STORAGE,
    Azurite,
    find_azurite,
    free_port,
    port_open,
    start_azurite,
)

# A file in the state directory saying this command made it: a folder without it is never emptied.
STATE_MARKER = ".azbatch-dev-state"
# Settings of the user's shell that would take the environment off its own database.
IGNORED_SETTINGS = ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CORE__SQL_ALCHEMY_CONN")
# The repository's root when the provider runs from a clone (its node_modules has Azurite).
CHECKOUT = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="azbatch-dev",
        description="A local development environment for your DAGs: the local Batch service, Azurite, and Airflow.",
    )
    modes = parser.add_subparsers(dest="mode", required=True, metavar="{start,test}")
    start = modes.add_parser(
        "start", help="run a whole local Airflow (UI, scheduler, DAG processor, triggerer) on your DAGs folder"
    )
    start.add_argument("dags_folder", nargs="?", default="dags", help="your DAGs folder (default: ./dags)")
    start.add_argument(
        "--port",
        type=int,
        default=os.environ.get("AZBATCH_DEV_PORT") or "8080",  # argparse converts a string default with type
        help="the API server's and UI's port (default: $AZBATCH_DEV_PORT or 8080; 0: any free port)",
    )
    test = modes.add_parser("test", help="run one DAG with `airflow dags test` and exit with its outcome")
    test.add_argument("dag_id", help="the DAG to run")
    test.add_argument("dags_folder", nargs="?", default="dags", help="your DAGs folder (default: ./dags)")
    for mode in (start, test):
        mode.add_argument(
            "--state-dir",
            type=Path,
            default=Path(".azbatch-dev"),
            help="the environment's Airflow home, Blob storage, Batch pools and jobs, and logs "
            "(default: ./.azbatch-dev)",
        )
        mode.add_argument(
            "--persist",
            action="store_true",
            help="keep the state of the last start (Airflow's runs and logs, connections, variables, Blob, Batch "
            "pools and jobs); without it the state directory starts empty",
        )
        mode.add_argument("--azurite", metavar="COMMAND", help="the azurite-blob command to run (default: found)")
        mode.add_argument("--no-storage", action="store_true", help=f"start no Azurite ({NEEDS_STORAGE} will not work)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    services, airflow = ProcessGroups(), ProcessGroups()
    with stopping.signals_stop(), contextlib.ExitStack() as running:
        # Closed in reverse: Airflow first (it polls Batch), then the Batch service, then Azurite.
        running.callback(services.stop_all)
        try:
            return _run(args, services, airflow, running)
        except Stopped as stop:
            _say(f"== {stop}: stopping everything")
            return 0 if args.mode == "start" else 128 + stop.signum
        except DevEnvError as exc:
            print(f"azbatch-dev: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            stopping.ignore()
            airflow.stop_all()
            running.close()
            _say("== Stopped: nothing of this environment is left running")
    return 1  # unreachable; for type checkers


def _run(
    args: argparse.Namespace, services: ProcessGroups, airflow: ProcessGroups, running: contextlib.ExitStack
) -> int:
    dags_folder = Path(args.dags_folder).resolve()
    if not dags_folder.is_dir():
        raise DevEnvError(
            f"DAGS_FOLDER {dags_folder} is not a folder: give the folder that holds your DAG files "
            f"(azbatch-dev {args.mode} {'DAG_ID ' if args.mode == 'test' else ''}path/to/dags)"
        )
    api_port = None
    if args.mode == "start":
        api_port = args.port or free_port()
        if port_open(api_port):
            raise DevEnvError(f"--port {api_port} is in use (another Airflow?): give another, or --port 0 for any")
    airflow_command()  # fail before anything starts
    state = _prepare_state(args.state_dir.resolve(), args.persist)
    home, logs = state / "airflow", state / "logs"
    home.mkdir(exist_ok=True)
    logs.mkdir(exist_ok=True)
    base_env = _base_environment()

    storage = _start_storage(args, services, state, base_env)
    batch, batch_process = _start_batch_service(running, storage, state / "batch", base_env)
    settings = airflow_settings(home, dags_folder, connection_json(batch, storage), api_port)
    env = {**base_env, **settings}
    _say("== Preparing the Airflow home (airflow db migrate)")
    migrate(airflow, env, home)

    if args.mode == "test":
        _print_environment(batch, storage, state, settings, [])
        _say(f"== airflow dags test {args.dag_id}")
        process = airflow.start("dags-test", [airflow_command(), "dags", "test", args.dag_id], env=env)
        code = process.wait()
        _say(f"== airflow dags test {args.dag_id} exited with {code}")
        return code

    assert api_port is not None
    _say("== Starting Airflow: api-server, scheduler, dag-processor, triggerer")
    start_airflow(airflow, env, api_port, logs)
    ui = f"   UI:       http://127.0.0.1:{api_port}  (no login: served on 127.0.0.1 only, every user is admin)"
    _print_environment(batch, storage, state, settings, [ui, f"   Logs:     {logs}/{{{','.join(COMPONENTS)}}}.log"])
    _say("== Ready. Ctrl-C stops everything.")
    while True:
        check_running(airflow, logs)
        if batch_process.poll() is not None:
            raise DevEnvError(f"the local Batch service exited with code {batch_process.returncode}")
        time.sleep(1)


def _prepare_state(state: Path, persist: bool) -> Path:
    if state.exists() and any(state.iterdir()):
        if not (state / STATE_MARKER).exists():
            raise DevEnvError(f"--state-dir {state} holds files azbatch-dev did not write: give a new or empty folder")
        if not persist:
            shutil.rmtree(state)
    state.mkdir(parents=True, exist_ok=True)
    (state / STATE_MARKER).write_text("The state of `azbatch-dev` (see --persist).\n")
    return state


def _base_environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in IGNORED_SETTINGS}
    # Airflow's components start their children by name: this environment's bin must be on PATH.
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start_storage(
    args: argparse.Namespace, services: ProcessGroups, state: Path, env: dict[str, str]
) -> Azurite | None:
    if args.no_storage:
        _say(f"== No storage (--no-storage): {NEEDS_STORAGE} will fail")
        return None
    found = find_azurite(args.azurite, [Path.cwd(), CHECKOUT])
    if found is None:
        _say(
            f"== No Node.js (npx) or Azurite found: starting without storage. {NEEDS_STORAGE} will fail; "
            "install Node.js, or Azurite (npm install -g azurite), or give --azurite COMMAND"
        )
        return None
    command, source = found
    _say(f"== Starting Azurite ({source})")
    return start_azurite(services, command, source, state / "azurite", env)


def _start_batch_service(
    running: contextlib.ExitStack, storage: Azurite | None, state: Path, env: dict[str, str]
) -> tuple[BatchEndpoint, subprocess.Popen[str]]:
    try:
        from local_azure_batch.testing import run_local_batch_service
    except ImportError:
        raise DevEnvError(
            "the local Batch service is not installed: pip install 'airflow-provider-azbatch[local]'"
        ) from None
    _say("== Starting the local Batch service")
    # Blob containers that pools mount are copied from Azurite.
    mounts = ["--blob-endpoint", f"{storage.account}={storage.url}"] if storage is not None else []
    # Pools, jobs and the nodes' files are kept in the state directory, which --persist keeps for the next start.
    arguments = ["--quiet", "--state-dir", str(state), *mounts]
    try:
        with signals_deferred():
            service = running.enter_context(run_local_batch_service(extra_args=arguments, env=env))
    except RuntimeError as exc:
        raise DevEnvError(str(exc)) from None
    return BatchEndpoint(service.url, service.account_name, service.account_key), service.process


def _print_environment(
    batch: BatchEndpoint, storage: Azurite | None, state: Path, settings: dict[str, str], first: list[str]
) -> None:
    for line in first:
        _say(line)
    _say(f"   Batch:    {batch.url}  (local Batch service, account {batch.account_name})")
    if storage is not None:
        _say(f"   Storage:  {storage.url}  (Azurite, account {storage.account})")
    else:
        _say(f"   Storage:  none ({NEEDS_STORAGE} will fail)")
    _say(f"   State:    {state}  (the next start keeps it with --persist)")
    _say("== To use this environment from another shell (airflow CLI, airflow azbatch ...):")
    for line in export_lines(settings):
        _say(line)


def _say(text: str) -> None:
    print(text, flush=True)

"""The ``airflow azbatch`` command group, as Airflow's CLI parser reads it (provider info ``cli`` entry).

Airflow imports this module for every ``airflow`` command: it defines arguments only. The commands'
code (and the Batch SDK) is imported when one of them runs (``lazy_load_command``).
"""

from __future__ import annotations

from airflow.cli.cli_config import (
    ARG_OUTPUT,
    ARG_VERBOSE,
    ARG_YES,
    ActionCommand,
    Arg,
    CLICommand,
    GroupCommand,
    lazy_load_command,
    positive_int,
)

_PACKAGE = "airflow_provider_azbatch.cli"

# Help texts are rich markup: a literal "[" is written "\\[".

ARG_CONN_ID = Arg(
    ("--conn-id",),
    help="The azbatch connection (default: \\[azbatch] default_conn_id, itself azbatch_default)",
    default=None,
)

# Which job: its id, or the Airflow task instance that submitted it.
ARG_JOB = Arg(
    ("job_id",),
    metavar="JOB",
    nargs="?",
    help="The Batch job id (or give --dag-id, --task-id and --run-id instead)",
)
ARG_TI_DAG_ID = Arg(("-d", "--dag-id"), help="The DAG of the Airflow task that submitted the job")
ARG_TI_TASK_ID = Arg(("-t", "--task-id"), help="The Airflow task that submitted the job")
ARG_TI_RUN_ID = Arg(("-r", "--run-id"), help="The DAG run of the Airflow task that submitted the job")
ARG_TI_MAP_INDEX = Arg(
    ("-m", "--map-index"),
    type=int,
    default=-1,
    help="The map index of a mapped Airflow task (default: -1, not mapped)",
)
TASK_INSTANCE_ARGS = (ARG_TI_DAG_ID, ARG_TI_TASK_ID, ARG_TI_RUN_ID, ARG_TI_MAP_INDEX)

# jobs list
# cli.outcomes.OUTCOMES (not imported: this module must stay light).
JOB_OUTCOMES = ("succeeded", "failed", "cancelled", "running", "waiting", "blocked", "disabled", "deleting")
JOB_STATES = ("active", "disabling", "enabling", "terminating", "completed")
ARG_LIST_STATE = Arg(
    ("--state",),
    action="append",
    choices=tuple(dict.fromkeys((*JOB_OUTCOMES, *JOB_STATES))),
    help="Only jobs with this outcome (succeeded, failed, cancelled, running, waiting, blocked) or Batch job state "
    "(active, completed...); repeat for several",
)
ARG_LIST_OUTCOME = Arg(
    ("--outcome",),
    action="append",
    choices=JOB_OUTCOMES,
    help="Only jobs with this outcome (as --state): e.g. --outcome failed --since 1d",
)
ARG_LIST_PREFIX = Arg(("--prefix",), help="Only jobs whose id starts with this")
ARG_LIST_SCHEDULE = Arg(
    ("--schedule",),
    metavar="SCHEDULE_ID",
    help="Only the jobs this Batch job schedule made ({schedule}:job-{n})",
)
ARG_LIST_DAG_ID = Arg(("-d", "--dag-id"), help="Only jobs submitted by this DAG (job metadata airflow_dag_id)")
ARG_LIST_TASK_ID = Arg(("-t", "--task-id"), help="Only jobs submitted by this Airflow task (airflow_task_id)")
ARG_LIST_RUN_ID = Arg(("-r", "--run-id"), help="Only jobs submitted in this DAG run (airflow_run_id)")
ARG_SINCE = Arg(
    ("--since",),
    help="Only from this time on: an ISO 8601 time (2026-12-01T10:00:00Z; UTC if no zone is given) or a "
    "duration ago (90s, 15m, 2h, 3d)",
)
ARG_UNTIL = Arg(("--until",), help="Only up to this time (same forms as --since)")
ARG_LIMIT = Arg(
    ("--limit",),
    type=positive_int(allow_zero=False),
    default=50,
    help="Show at most this many jobs, the newest first (default: 50)",
)

ARG_TASK_LIMIT = Arg(
    ("--limit",),
    type=positive_int(allow_zero=False),
    default=200,
    help="Show at most this many tasks, by task id (default: 200; the counts cover all of them)",
)

# jobs cancel
ARG_REASON = Arg(
    ("--reason",),
    default="UserTerminate",
    help="The terminate reason recorded on the job (default: UserTerminate)",
)
ARG_DELETE = Arg(("--delete",), action="store_true", help="Delete the job after terminating it")

# logs
ARG_LOGS_TASK = Arg(
    ("task",),
    metavar="TASK",
    nargs="?",
    help="The Batch task (default: every task of the job, prefixed lines \\[task] and \\[task:stderr])",
)
ARG_STDERR = Arg(("--stderr",), action="store_true", help="Show stderr instead of stdout (without TASK: only stderr)")
ARG_TAIL = Arg(
    ("--tail",),
    type=positive_int(allow_zero=True),
    metavar="N",
    help="Only the last N lines (of each stream of each task)",
)
ARG_FOLLOW = Arg(
    ("-f", "--follow"),
    action="store_true",
    help="Keep showing new output until the task (without TASK: every task shown) has ended",
)
ARG_GREP = Arg(("--grep",), metavar="REGEX", help="Only lines matching this regular expression (Python syntax)")
ARG_LOG_SINCE = Arg(
    ("--since",),
    help="Only lines from this time on, by the time a line starts with (ISO 8601; lines without one belong "
    "to the timestamped line above). An ISO 8601 time, UTC if no zone is given, or a duration ago (15m, 2h)",
)
ARG_LOG_UNTIL = Arg(("--until",), help="Only lines up to this time (as --since; not with --follow)")
ARG_MAX_TASKS = Arg(
    ("--max-tasks",),
    type=positive_int(allow_zero=False),
    metavar="N",
    help="Without TASK: show the first N tasks by id (default: \\[azbatch] max_streamed_tasks)",
)
ARG_POLL_INTERVAL = Arg(
    ("--poll-interval",),
    type=float,
    metavar="SECONDS",
    help="With --follow: seconds between looks at the job (default: \\[azbatch] poll_interval)",
)

# pools
ARG_POOL_ID = Arg(("pool_id",), metavar="POOL", help="The Batch pool id")
ARG_NODE_IDS = Arg(
    ("node_ids",),
    metavar="NODE",
    nargs="*",
    help="Node ids (default: the pool's failed nodes, at most 3: start task failed, unusable, unknown, offline)",
)
ARG_LOGS_SINCE = Arg(
    ("--since",),
    help="Logs written from this time on: an ISO 8601 time or a duration ago (90s, 15m, 2h, 3d); default: since "
    "each node was allocated",
)

# check
ARG_DAG_FILE = Arg(
    ("--dag-file",),
    metavar="PATH",
    help="A DAG file: the pools of its Batch tasks are checked too (image and VM size offered, vCPU quota, existing "
    "pools exist), and its tasks' storage needs decide whether a missing storage account fails the check",
)
ARG_NO_DAGS = Arg(
    ("--no-dags",),
    action="store_true",
    help="A fast check: do not read the DAGs folder ([core] dags_folder), whose every Batch task is checked when no "
    "--dag-file, --requirements or --vm-size is given",
)
ARG_CHECK_DAG_ID = Arg(
    ("--dag-id",),
    action="append",
    metavar="DAG_ID",
    help="Only this DAG of --dag-file or of the DAGs folder (default: every DAG); repeat for several",
)
ARG_REQUIREMENTS = Arg(
    ("--requirements",),
    metavar="JSON",
    help='A pool from resource requirements to check, as BatchPool.auto would make it, e.g. \'{"gpus": 1, '
    '"gpu_kind": "T4"}\' (keys of ResourceRequirements: cpus, memory, gpus, gpu_kind, low_priority, os_image, '
    "containers)",
)
ARG_VM_SIZE = Arg(("--vm-size",), metavar="NAME", help="With or without --requirements: the pool's VM size by name")
ARG_MAX_NODES = Arg(
    ("--max-nodes",),
    type=positive_int(allow_zero=False),
    default=1,
    metavar="N",
    help="The nodes of the --requirements/--vm-size pool, for its quota (default: 1)",
)
ARG_REQUIRE_STORAGE = Arg(
    ("--require-storage",),
    action="store_true",
    help="Fail when the connection has no storage account even if no task checked needs one",
)
ARG_MANAGEMENT_CREDENTIAL = Arg(
    ("--management-credential",),
    choices=("connection", "default"),
    default="connection",
    help="Who reads the account's quotas and the region's VM sizes from Azure Resource Manager: the connection's "
    "Entra ID credential (default; a shared key cannot), or DefaultAzureCredential (az login, a managed identity, "
    "AZURE_* variables)",
)
ARG_STRICT = Arg(("--strict",), action="store_true", help="Exit 1 also when something could not be read (unknown)")
ARG_CHECK_OUTPUT = Arg(
    ("-o", "--output"),
    choices=("text", "json"),
    default="text",
    help="text (default): a line per finding, its fix below it; json: the whole report, for scripts",
)
CHECK_ARGS = (
    ARG_CONN_ID,
    ARG_DAG_FILE,
    ARG_NO_DAGS,
    ARG_CHECK_DAG_ID,
    ARG_REQUIREMENTS,
    ARG_VM_SIZE,
    ARG_MAX_NODES,
    ARG_REQUIRE_STORAGE,
    ARG_MANAGEMENT_CREDENTIAL,
    ARG_STRICT,
    ARG_CHECK_OUTPUT,
    ARG_VERBOSE,
)
CHECK_HELP = "Check a connection against its Batch account before the first run: each thing a run needs, ok or its fix"
CHECK_DESCRIPTION = (
    "Preflight of a connection: authentication and the identity it resolves to; the data-plane permissions a run "
    "needs (jobs listed, a throw-away job created and deleted); the storage account (a container created, a blob "
    "written, read and deleted, a SAS the credential signs); the pools of every Batch task of the DAGs folder "
    "([core] dags_folder; or of --dag-file; or the pool of --requirements or --vm-size; --no-dags for none): each "
    "pool's image and VM size offered in the account's region and the account's vCPU quota for its family, summed "
    "over the pools that share it; and what the nodes will not reach: the storage account's public network access "
    "and network rules, a pool's subnet, whether the identity may join it, its network security group (read from "
    "Azure Resource Manager when the credential may). Each line is ok, or what is wrong and the fix. Exit code 0: "
    "ready; 1: something a run needs is missing (or, with --strict, could not be read); 2: wrong arguments. Nothing "
    "is left behind (a container that could not be deleted is named). On every Airflow line: python -m "
    "airflow_provider_azbatch.preflight takes the same arguments."
)
CHECK_COMMAND = ActionCommand(
    name="check",
    help=CHECK_HELP,
    description=CHECK_DESCRIPTION,
    # The command is the preflight's own face (airflow_provider_azbatch.preflight.command), above this package.
    func=lazy_load_command("airflow_provider_azbatch.preflight.command.check_command"),
    args=CHECK_ARGS,
)

JOBS_COMMANDS = (
    ActionCommand(
        name="list",
        help="List Batch jobs, the newest first",
        description="List the account's Batch jobs, the newest first, with each job's outcome: succeeded, failed (a "
        "task failed, or the job ended before its tasks), cancelled, running, waiting (for nodes), blocked (nothing "
        "can run: tasks wait on failed ones, or the job cannot be scheduled). --dag-id, --task-id and --run-id "
        "match the metadata the AzureBatchJobOperator stores on the jobs it submits. Which jobs failed since "
        "yesterday: --state failed --since 1d.",
        func=lazy_load_command(f"{_PACKAGE}.jobs.jobs_list"),
        args=(
            ARG_CONN_ID,
            ARG_LIST_STATE,
            ARG_LIST_OUTCOME,
            ARG_LIST_PREFIX,
            ARG_LIST_SCHEDULE,
            ARG_LIST_DAG_ID,
            ARG_LIST_TASK_ID,
            ARG_LIST_RUN_ID,
            ARG_SINCE,
            ARG_UNTIL,
            ARG_LIMIT,
            ARG_OUTPUT,
            ARG_VERBOSE,
        ),
    ),
    ActionCommand(
        name="describe",
        help="Show a Batch job: its state, task counts and every task",
        description="Show a Batch job: state, task counts and a row per task (state, exit code, node, retries, "
        "start, end, duration, failure), with the subtasks of multi-node tasks. Give the job id, or the Airflow "
        "task instance that submitted it (--dag-id, --task-id, --run-id and for mapped tasks --map-index: "
        "its latest job).",
        func=lazy_load_command(f"{_PACKAGE}.jobs.jobs_describe"),
        args=(ARG_JOB, *TASK_INSTANCE_ARGS, ARG_TASK_LIMIT, ARG_CONN_ID, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="cancel",
        help="Terminate a Batch job (its running tasks are killed); --delete to delete it too",
        description="Terminate a Batch job: running tasks are killed, tasks not started never run. Give the job "
        "id, or the Airflow task instance that submitted it (its latest job).",
        func=lazy_load_command(f"{_PACKAGE}.jobs.jobs_cancel"),
        args=(ARG_JOB, *TASK_INSTANCE_ARGS, ARG_REASON, ARG_DELETE, ARG_YES, ARG_CONN_ID, ARG_VERBOSE),
    ),
)

POOLS_COMMANDS = (
    ActionCommand(
        name="list",
        help="List Batch pools: which are idle (nodes that run no task) and what they cost an hour",
        description="List the account's Batch pools: idle (yes: it has nodes and none runs a task), what its "
        "current nodes cost an hour at the provider catalog's list prices (spot nodes at the list price too: an "
        "upper bound), state, VM size and nodes.",
        func=lazy_load_command(f"{_PACKAGE}.pools.pools_list"),
        args=(ARG_CONN_ID, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="describe",
        help="Show a Batch pool: size, nodes by state, autoscaling, errors and running tasks",
        func=lazy_load_command(f"{_PACKAGE}.pools.pools_describe"),
        args=(ARG_POOL_ID, ARG_CONN_ID, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="nodes",
        help="List a Batch pool's nodes: state, scheduling, address, start task and errors",
        func=lazy_load_command(f"{_PACKAGE}.nodes.pools_nodes"),
        args=(ARG_POOL_ID, ARG_CONN_ID, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="upload-logs",
        help="Keep nodes' Batch service logs in the connection's storage account, and say where they are",
        description="Have Batch upload the service (agent) logs of a pool's nodes to the connection's storage "
        "account, container \\[azbatch] node_logs_container, before the nodes go (a pool deleted or shrunk takes "
        "them along), and print where each node's logs are. Without NODE: the pool's failed nodes.",
        func=lazy_load_command(f"{_PACKAGE}.nodes.pools_upload_logs"),
        args=(ARG_POOL_ID, ARG_NODE_IDS, ARG_LOGS_SINCE, ARG_CONN_ID, ARG_OUTPUT, ARG_VERBOSE),
    ),
    ActionCommand(
        name="delete",
        help="Delete a Batch pool (asks first; --yes to skip the question)",
        description="Delete a Batch pool: its nodes are released (and stop costing), tasks running on them are "
        "stopped. Asks for confirmation; without a terminal, give --yes.",
        func=lazy_load_command(f"{_PACKAGE}.pools.pools_delete"),
        args=(ARG_POOL_ID, ARG_YES, ARG_CONN_ID, ARG_VERBOSE),
    ),
)

LOGS_COMMAND = ActionCommand(
    name="logs",
    help="Show the output of a Batch job's tasks (from their nodes, or from Blob once a node is gone)",
    description="Show the stdout (or --stderr) of a Batch task, or of every task of a job with lines prefixed "
    "\\[task] and \\[task:stderr]. --follow shows new output as it is written, each line once, until the task ends. "
    "A task whose node is gone is read from the logs the job uploaded to Blob storage. Give the job id, or the "
    "Airflow task instance that submitted it (then the only positional argument is TASK).",
    func=lazy_load_command(f"{_PACKAGE}.logs.logs"),
    args=(
        ARG_JOB,
        ARG_LOGS_TASK,
        *TASK_INSTANCE_ARGS,
        ARG_STDERR,
        ARG_TAIL,
        ARG_FOLLOW,
        ARG_GREP,
        ARG_LOG_SINCE,
        ARG_LOG_UNTIL,
        ARG_MAX_TASKS,
        ARG_POLL_INTERVAL,
        ARG_CONN_ID,
        ARG_VERBOSE,
    ),
)

AZBATCH_COMMANDS = GroupCommand(
    name="azbatch",
    help="Azure Batch (azbatch provider): a preflight check, jobs, task output and pools",
    subcommands=(
        CHECK_COMMAND,
        GroupCommand(name="jobs", help="Batch jobs: list, describe, cancel", subcommands=JOBS_COMMANDS),
        LOGS_COMMAND,
        GroupCommand(
            name="pools", help="Batch pools: list, describe, nodes, upload-logs, delete", subcommands=POOLS_COMMANDS
        ),
    ),
)


def get_azbatch_cli_commands() -> list[CLICommand]:
    """The provider's commands (the provider info's ``cli`` entry names this function)."""
    return [AZBATCH_COMMANDS]

"""What runs on the nodes for a TorchX role: each replica's wrapper, how a node knows which replica it runs, and
the job release task that keeps the other replicas' output. Pure (shell text); no I/O, no Airflow.

Every replica runs under the same small POSIX ``sh`` wrapper (it needs ``awk``, ``date``, ``stat`` or ``wc``,
``mv`` and ``sleep``: busybox has them all), which keeps beside the replica's ``stdout.txt``/``stderr.txt``:

- ``torchx-replica.txt``: the replica's own record (``key=value`` lines: replica, state, exit code, restarts,
  start and end time, node address). Batch keeps a task's exit code, which is replica 0's, but a multi-instance
  task's other replicas run in the background of its coordination command, whose exit code is not theirs;
- ``torchx-times.txt``: ``<epoch seconds> <stdout bytes> <stderr bytes>``, a line each second the output grew:
  Batch's output lines carry no time, and this is what ``since``/``until`` select by.

With ``RetryPolicy.REPLICA`` the wrapper restarts the replica in place (on its node) up to ``max_retries`` times.

Which replica a node runs: the primary (``AZ_BATCH_IS_CURRENT_NODE_MASTER``) runs replica 0, by construction:
the task's own command runs on it and nowhere else. Every other node finds its own address among the task's
hosts (``AZ_BATCH_HOST_LIST`` less ``AZ_BATCH_MASTER_NODE``'s host: the addresses of the machine, read from
``/proc/net/fib_trie``; or the one left when there are two nodes) and takes its place among them in sorted order,
1 to N-1: the list's own order (which Batch does not document) and ``hostname -I`` (which busybox lacks) play no
part. A node whose address is on no interface of its own (the local Batch service's) and that is one of more than
two falls back to its subtask's number, the name of its task directory.

A multi-instance task's output files are uploaded from the primary only, so the other replicas' output would go
with their nodes: each registers its directory in ``$AZ_BATCH_NODE_SHARED_DIR/torchx/<job>/<task>.<replica>``,
and the job release task (which runs on every node of the job when it ends, before Batch deletes a pool made for
it) uploads their files to ``<job's log path>/<task>/replicas/<replica>/`` with ``curl`` or ``python3`` from the
node's host.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

RANK0_ENV = "TORCHX_RANK0_HOST"
REPLICA_ENV = "TORCHX_REPLICA_ID"
HOST_ENV = "TORCHX_REPLICA_HOST"
STATUS_FILE = "torchx-replica.txt"
TIMES_FILE = "torchx-times.txt"
# Both, for an output file pattern.
RECORDS_PATTERN = "torchx-*.txt"
# A replica's files, in the order the release task uploads them.
REPLICA_FILES = ("stdout.txt", "stderr.txt", STATUS_FILE, TIMES_FILE)
# Under a task's uploaded logs: replicas/<k>/<file> for replicas other than 0.
REPLICAS_DIR = "replicas"
# What the release task is told by the provider (JobSideTask.log_upload): the log container's URL with a write
# SAS, and the job's log path in it. (The same names as submission/job.py's; this module imports no Airflow.)
LOGS_URL_ENV = "AZBATCH_LOGS_URL"
LOGS_PATH_ENV = "AZBATCH_LOGS_PATH"
# How long a multi-instance task's primary waits after replica 0 ended (primary_command).
GRACE_SECONDS = 3
# The preparation task Batch needs for a release task: it does nothing.
PREPARATION_COMMAND = "true"

# The wrapper's functions. Its own messages go to stderr with this mark; its tools' are discarded.
_MARK = "torchx azure_batch:"
_FUNCTIONS = f"""\
_tx_size() {{ stat -c %s "$1" 2>/dev/null || wc -c <"$1" 2>/dev/null || echo 0; }}
_tx_sample() {{ echo "$(date +%s) $(_tx_size "$_tx_dir/stdout.txt") $(_tx_size "$_tx_dir/stderr.txt")"; }}
_tx_times() {{
  _l=
  while :; do
    _s=$(_tx_sample)
    [ "${{_s#* }}" = "$_l" ] || {{ echo "$_s" >>"$_tx_dir/{TIMES_FILE}"; _l=${{_s#* }}; }}
    sleep 1
  done
}}
_tx_status() {{
  printf 'replica=%s\\nstate=%s\\nexit_code=%s\\nrestarts=%s\\nstarted=%s\\nended=%s\\nhost=%s\\n' \\
    "${REPLICA_ENV}" "$1" "$2" "$3" "$_tx_started" "$4" "${{{HOST_ENV}:-}}" >"$_tx_dir/{STATUS_FILE}.tmp" &&
    mv -f "$_tx_dir/{STATUS_FILE}.tmp" "$_tx_dir/{STATUS_FILE}"
}} 2>/dev/null
_tx_supervise() {{
  _tx_dir=${{AZ_BATCH_TASK_DIR:-.}}
  _tx_started=$(date +%s)
  _n=0
  _tx_status running "" 0 ""
  _tx_times </dev/null >/dev/null 2>&1 &
  _tx_sampler=$!
  while :; do
    _tx_main
    _c=$?
    if [ "$_c" -eq 0 ] || [ "$_n" -ge "$1" ]; then break; fi
    _n=$((_n + 1))
    echo "{_MARK} replica ${REPLICA_ENV} exited with code $_c: restart $_n of $1" >&2
    _tx_status running "$_c" "$_n" ""
  done
  if [ "$_c" -eq 0 ]; then _r=succeeded; else _r=failed; fi
  _tx_status "$_r" "$_c" "$_n" "$(date +%s)"
  kill "$_tx_sampler" 2>/dev/null
  _tx_sample >>"$_tx_dir/{TIMES_FILE}" 2>/dev/null
  return "$_c"
}}"""

# On a node other than the primary: which replica it runs, and its address when it can be told (module docstring).
_IDENTIFY = f"""\
eval "$(cat /proc/net/fib_trie 2>/dev/null | awk -v hosts="$AZ_BATCH_HOST_LIST" \\
  -v master="${{AZ_BATCH_MASTER_NODE%:*}}" -v dir="${{AZ_BATCH_TASK_DIR##*/}}" '
  /\\/32 host LOCAL/ {{ mine[ip] = 1 }}
  {{ ip = $2 }}
  END {{
    n = split(hosts, h, ",")
    for (i = 1; i <= n; i++) if (h[i] != master) {{ others++; last = h[i]; if (h[i] in mine) own = h[i] }}
    if (own == "" && others == 1) own = last
    if (own != "") {{ id = 1; for (i = 1; i <= n; i++) if (h[i] != master && h[i] < own) id++ }}
    else if (dir ~ /^[1-9][0-9]*$/) id = dir
    print "{REPLICA_ENV}=" id; print "{HOST_ENV}=" own
  }}')"
if [ -z "${REPLICA_ENV}" ]; then
  echo "{_MARK} node $AZ_BATCH_NODE_ID cannot tell which replica it runs: none of its addresses is in \\
AZ_BATCH_HOST_LIST ($AZ_BATCH_HOST_LIST)" >&2
  exit 1
fi"""

# torchrun's defaults on a node (a role's own values win; torchrun reads PET_<NAME> for a missing argument):
# where this node's agent listens, when the node's address is known; and that the primary hosts the rendezvous
# store (torch would otherwise decide by the host name, which every node of the local Batch service shares).
_TORCHRUN_DEFAULTS = f"""\
[ -z "${HOST_ENV}" ] || export PET_LOCAL_ADDR="${{PET_LOCAL_ADDR:-${HOST_ENV}}}"
case ",$PET_RDZV_CONF," in *,is_host=*) ;; *) \
export PET_RDZV_CONF="${{PET_RDZV_CONF:+$PET_RDZV_CONF,}}is_host=$AZ_BATCH_IS_CURRENT_NODE_MASTER";; esac"""

# The node's record for the release task (module docstring).
_REGISTER = f"""\
_tx_reg="$AZ_BATCH_NODE_SHARED_DIR/torchx/$AZ_BATCH_JOB_ID"
[ -n "$AZ_BATCH_NODE_SHARED_DIR" ] && mkdir -p "$_tx_reg" 2>/dev/null &&
  printf '%s\\n' "${{AZ_BATCH_TASK_DIR:-$PWD}}" >"$_tx_reg/$AZ_BATCH_TASK_ID.${REPLICA_ENV}" 2>/dev/null"""

_PUT_PYTHON = (
    "import os, sys, urllib.request as r\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    headers = {'x-ms-blob-type': 'BlockBlob', 'Content-Length': str(os.path.getsize(sys.argv[1]))}\n"
    "    r.urlopen(r.Request(sys.argv[2], data=f, method='PUT', headers=headers), timeout=600).close()"
)

RELEASE_COMMAND = f"""\
_tx_put() {{
  [ -f "$1" ] || return 0
  _u="${{{LOGS_URL_ENV}%%\\?*}}/$2?${{{LOGS_URL_ENV}#*\\?}}"
  if command -v curl >/dev/null 2>&1; then
    curl -fsS --retry 3 -H 'x-ms-blob-type: BlockBlob' -H 'Expect:' -T "$1" "$_u" >/dev/null
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c {shlex.quote(_PUT_PYTHON)} "$1" "$_u"
  else
    echo "{_MARK} node $AZ_BATCH_NODE_ID has neither curl nor python3: $1 is not kept" >&2
    return 1
  fi
}}
[ -n "$AZ_BATCH_NODE_SHARED_DIR" ] || exit 0
_tx_rc=0
_tx_reg="$AZ_BATCH_NODE_SHARED_DIR/torchx/$AZ_BATCH_JOB_ID"
for _tx_f in "$_tx_reg"/*; do
  [ -f "$_tx_f" ] || continue
  _tx_d=$(cat "$_tx_f")
  _tx_n=${{_tx_f##*/}}
  for _tx_x in {" ".join(REPLICA_FILES)}; do
    _tx_put "$_tx_d/$_tx_x" "${LOGS_PATH_ENV}/${{_tx_n%.*}}/{REPLICAS_DIR}/${{_tx_n##*.}}/$_tx_x" || _tx_rc=1
  done
done
rm -rf "$_tx_reg"
exit $_tx_rc"""


def _main(exports: Mapping[str, str], entrypoint: str, args: Sequence[str], workspace: bool) -> str:
    """``_tx_main``: the replica's own command, in a subshell (its variables and directory stay its own)."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in exports.items()]
    if workspace:
        # Where torchx's other schedulers run a role: in its workspace.
        lines.append('cd "$AZBATCH_WORKSPACE" || exit 1')
    lines.append("exec " + shlex.join([entrypoint, *args]))
    return "_tx_main() (\n" + "\n".join(f"  {line}" for line in lines) + "\n)"


def single_node_command(
    exports: Mapping[str, str], entrypoint: str, args: Sequence[str], *, workspace: bool, restarts: int
) -> str:
    """The command of a role with one replica: replica 0, its rendezvous host this node."""
    return "\n".join(
        [
            f"export {REPLICA_ENV}=0 {RANK0_ENV}=localhost",
            _FUNCTIONS,
            _main(exports, entrypoint, args, workspace),
            f"_tx_supervise {restarts}",
        ]
    )


def primary_command(
    exports: Mapping[str, str], entrypoint: str, args: Sequence[str], *, workspace: bool, restarts: int
) -> str:
    """A multi-instance task's own command: replica 0, on the primary node."""
    return "\n".join(
        [
            f'export {REPLICA_ENV}=0 {RANK0_ENV}="${{AZ_BATCH_MASTER_NODE%:*}}"',
            f'export {HOST_ENV}="${{AZ_BATCH_MASTER_NODE%:*}}"',
            _TORCHRUN_DEFAULTS,
            _FUNCTIONS,
            _main(exports, entrypoint, args, workspace),
            f"_tx_supervise {restarts}",
            # Batch ends the other nodes' replicas with this command: those ending with replica 0 (torchrun's
            # do) get the time to record how they ended.
            f"_tx_rc=$?\nsleep {GRACE_SECONDS}\nexit $_tx_rc",
        ]
    )


def coordination_command(
    replicas: Sequence[tuple[Mapping[str, str], str, Sequence[str]]], *, workspace: bool, restarts: int
) -> str:
    """A multi-instance task's coordination command: on every node but the primary, its replica in the background
    (``replicas``: the exports, entrypoint and arguments of replicas 1 to N-1)."""
    mains = [_main(exports, entrypoint, args, workspace) for exports, entrypoint, args in replicas]
    if all(main == mains[0] for main in mains):
        chosen = mains[0]
    else:
        branches = "\n".join(f"{index})\n{main}\n;;" for index, main in enumerate(mains, 1))
        chosen = (
            f'case "${REPLICA_ENV}" in\n{branches}\n*)\n'
            f'echo "{_MARK} this node took replica ${REPLICA_ENV}, not one of 1 to {len(mains)}" >&2\nexit 1\n;;\nesac'
        )
    body = "\n".join(
        [
            _IDENTIFY,
            f'export {REPLICA_ENV} {RANK0_ENV}="${{AZ_BATCH_MASTER_NODE%:*}}"',
            f'[ -z "${HOST_ENV}" ] || export {HOST_ENV}',
            _TORCHRUN_DEFAULTS,
            _REGISTER,
            _FUNCTIONS,
            chosen,
            f"_tx_supervise {restarts} </dev/null &",
        ]
    )
    return f'if [ "$AZ_BATCH_IS_CURRENT_NODE_MASTER" != true ]; then\n{body}\nfi'

#!/usr/bin/env bash
# `make test`'s parts, timed: `scripts/timed.sh NAME COMMAND...` runs COMMAND and prints NAME's wall time and the
# CPU time of its processes as it ends; `scripts/timed.sh --begin` starts a run, `scripts/timed.sh --end` prints
# every part's times and the total. A part that fails prints the parts so far before make stops.
# The CPU time tells a slow machine from a slow part: on a busy machine wall time grows, CPU time much less.
set -uo pipefail
log=${TIMED_LOG:-.test-home/parts}

summary() {
    echo "=== Wall time per part (CPU seconds of its processes)"
    cat "$log"
    printf '%6d s %26s\n' "$(($(date +%s) - $(cat "$log.begin")))" "total"
}

case ${1:?usage: scripts/timed.sh --begin | --end | NAME COMMAND...} in
--begin)
    mkdir -p "$(dirname "$log")"
    date +%s >"$log.begin"
    : >"$log"
    exit 0
    ;;
--end)
    summary
    exit 0
    ;;
esac

name=$1
shift
echo "=== ${name}"
start=$(date +%s)
"$@"
status=$?
took=$(($(date +%s) - start))
# `times`: this shell's user and system time, then its children's (every process the part ran and waited for).
# Written to a file by this shell itself: in a pipeline or $(...), `times` would report a subshell's.
times >"$log.times"
cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); sum += t[1] * 60 + t[2] } printf "%.0f", sum }' "$log.times")
outcome=$([[ $status -eq 0 ]] && echo "" || echo "  FAILED (exit status $status)")
line=$(printf '%6d s %6d s CPU  %s%s' "$took" "$cpu" "$name" "$outcome")
echo "=== ${name}: ${took} s (${cpu} s CPU)${outcome}"
[[ -f $log ]] && echo "$line" >>"$log"
if [[ $status -ne 0 && -f $log.begin ]]; then
    summary
fi
exit "$status"

"""The words of the autoscale formula language: its service variables, constants, functions and limits.

The language is documented at https://learn.microsoft.com/azure/batch/batch-automatic-scaling; this
package implements the subset :data:`SUPPORTED_SUMMARY` lists, and rejects the rest naming the construct.
"""

from __future__ import annotations

# "The formula string cannot exceed 8 KB" (docs); the SDKs document 8192 characters.
MAX_FORMULA_LENGTH = 8192
MAX_STATEMENTS = 100

# -- service-defined variables --
TARGET_DEDICATED = "$TargetDedicatedNodes"
TARGET_LOW_PRIORITY = "$TargetLowPriorityNodes"
DEALLOCATION = "$NodeDeallocationOption"
WRITABLE = (TARGET_DEDICATED, TARGET_LOW_PRIORITY, DEALLOCATION)
# Documented aliases; "the value assigned to the fully named variable will take precedence".
ALIASES = {"$TargetDedicated": TARGET_DEDICATED, "$TargetLowPriority": TARGET_LOW_PRIORITY}

#: Variables whose history the service model records; read them with GetSample() and friends.
SAMPLED_VARIABLES = (
    "$ActiveTasks",
    "$RunningTasks",
    "$PendingTasks",
    "$SucceededTasks",
    "$FailedTasks",
    "$CurrentDedicatedNodes",
    "$CurrentLowPriorityNodes",
    "$PreemptedNodeCount",
    "$UsableNodeCount",
)
# Readable as plain numbers: the docs use "$CurrentDedicatedNodes * 1.1" directly.
SCALAR_READ_ONLY = ("$CurrentDedicatedNodes", "$CurrentLowPriorityNodes", "$TaskSlotsPerNode")
# Node resource metrics: the local service runs tasks as processes and measures none of these.
RESOURCE_METRICS = (
    "$CPUPercent",
    "$WallClockSeconds",
    "$MemoryBytes",
    "$DiskBytes",
    "$DiskReadBytes",
    "$DiskWriteBytes",
    "$DiskReadOps",
    "$DiskWriteOps",
    "$NetworkInBytes",
    "$NetworkOutBytes",
    "$SampleNodeCount",
)
READ_ONLY = frozenset(SAMPLED_VARIABLES) | frozenset(SCALAR_READ_ONLY) | frozenset(RESOURCE_METRICS)
SERVICE_NAMES = {name.lower(): name for name in (*WRITABLE, *ALIASES, *READ_ONLY)}  # for "did you mean" on a wrong case

DEALLOCATION_OPTIONS = ("requeue", "terminate", "taskcompletion", "retaineddata")

SECONDS_PER_DAY = 86_400.0
TIME_INTERVALS = {
    "TimeInterval_Zero": 0.0,
    "TimeInterval_100ns": 1e-7,
    "TimeInterval_Microsecond": 1e-6,
    "TimeInterval_Millisecond": 1e-3,
    "TimeInterval_Second": 1.0,
    "TimeInterval_Minute": 60.0,
    "TimeInterval_Hour": 3_600.0,
    "TimeInterval_Day": SECONDS_PER_DAY,
    "TimeInterval_Week": 7 * SECONDS_PER_DAY,
    "TimeInterval_Year": 365 * SECONDS_PER_DAY,
}

# name -> (min args, max args or None for a doubleVecList)
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "avg": (1, None),
    "ceil": (1, None),
    "floor": (1, None),
    "len": (1, None),
    "lg": (1, None),
    "ln": (1, None),
    "log": (1, None),
    "max": (1, None),
    "min": (1, None),
    "norm": (1, None),
    "percentile": (2, 2),
    "rand": (0, 0),
    "range": (1, None),
    "round": (1, None),
    "std": (1, None),
    "stop": (0, 0),
    "sum": (1, None),
    "time": (0, 1),
    "val": (2, 2),
}
METHODS: dict[str, tuple[int, int]] = {
    "GetSample": (1, 3),
    "GetSamplePercent": (1, 2),
    "GetSamplePeriod": (0, 0),
    "Count": (0, 0),
    "HistoryBeginTime": (0, 0),
}
TIMESTAMP_MEMBERS = ("year", "month", "day", "weekday", "hour", "minute", "second")

SUPPORTED_SUMMARY = """\
Autoscale formulas (local Batch service)

Supported:
- Statements separated by ';' (a trailing ';' and blank statements are fine), line breaks,
  // line comments and /* block */ comments. At most 8192 characters and 100 statements.
- Assignments to user variables (with or without a leading '$') and to $TargetDedicatedNodes,
  $TargetLowPriorityNodes (aliases $TargetDedicated, $TargetLowPriority) and
  $NodeDeallocationOption (requeue, terminate, taskcompletion, retaineddata).
- Types double, doubleVec, timeinterval (TimeInterval_Zero/100ns/Microsecond/Millisecond/Second/
  Minute/Hour/Day/Week/Year), timestamp (time(), time("2025-01-01T00:00:00Z"), RFC 1123 strings;
  members year, month, day, weekday, hour, minute, second) and "double-quoted" strings.
- Operators + - * / (doubles, doubleVec element-wise, timeinterval and timestamp arithmetic),
  unary - and !, < <= > >= == != (giving 1 or 0), && ||, c ? a : b, parentheses.
- Functions avg, ceil, floor, len, lg, ln, log, max, min, norm, percentile, rand, range, round,
  std, stop, sum, time, val; the list functions take any mix of doubles and doubleVecs.
- Sampled variables $ActiveTasks, $RunningTasks, $PendingTasks, $SucceededTasks, $FailedTasks,
  $CurrentDedicatedNodes, $CurrentLowPriorityNodes, $PreemptedNodeCount, $UsableNodeCount with
  GetSample(count | interval [, percent] | start, end [, percent]), GetSamplePercent(interval |
  start, end), GetSamplePeriod(), Count(), HistoryBeginTime(). Samples are taken every sample
  period of the local service (not necessarily 30 s) and percentages are computed against it.
- $CurrentDedicatedNodes, $CurrentLowPriorityNodes and $TaskSlotsPerNode also read as plain numbers.

Not supported (the formula is rejected with an error naming the construct):
- Node resource metrics: $CPUPercent, $WallClockSeconds, $MemoryBytes, $DiskBytes, $DiskReadBytes,
  $DiskWriteBytes, $DiskReadOps, $DiskWriteOps, $NetworkInBytes, $NetworkOutBytes, $SampleNodeCount.
- Undocumented functions (abs, vec, ...), the % operator, vector literals and indexing with [].
- A sampled task or node-count variable used without a method ($PendingTasks instead of
  $PendingTasks.GetSample(1)).

Local choices where the documentation is silent: stop() ends evaluation and keeps what was
assigned so far; GetSample(count) returns the samples there are (at least one is required);
std() of one value is 0; percentile() uses the nearest-rank method; timestamp.weekday counts
Sunday as 0; user variables are listed in the results sorted by name, as in the service's example.
"""

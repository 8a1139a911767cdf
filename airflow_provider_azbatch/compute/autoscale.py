"""Batch autoscale formulas that size a pool by its pending tasks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from airflow_provider_azbatch.compute.errors import InvalidAutoscaleError

# Limits the Batch service enforces (REST API autoScaleEvaluationInterval / taskSlotsPerNode).
MIN_EVALUATION_INTERVAL = timedelta(minutes=5)
MAX_EVALUATION_INTERVAL = timedelta(hours=168)
MAX_TASK_SLOTS_PER_NODE = 256
# Batch records $PendingTasks and its other metrics about every 30 seconds: one sample.
SAMPLE_PERIOD = timedelta(seconds=30)


def _check_count(
    field: str,
    value: object,
    low: int,
    high: int | None = None,
    error: type[ValueError] = InvalidAutoscaleError,
) -> int:
    too_high = high is not None and isinstance(value, int) and value > high
    if isinstance(value, bool) or not isinstance(value, int) or value < low or too_high:
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise error(f"{field} must be a whole number {bounds}, got {value!r}")
    return value


def check_node_bounds(
    max_nodes: int, min_nodes: int, *, prefix: str, error: type[ValueError] = InvalidAutoscaleError
) -> None:
    """Validate ``1 <= max_nodes`` and ``0 <= min_nodes <= max_nodes``; ``prefix`` names the caller."""
    _check_count(f"{prefix}.max_nodes", max_nodes, 1, error=error)
    _check_count(f"{prefix}.min_nodes", min_nodes, 0, max_nodes, error=error)


def autoscale_formula(
    max_nodes: int,
    *,
    min_nodes: int = 0,
    low_priority: bool = False,
    sample_window: timedelta = timedelta(minutes=1),
    task_slots_per_node: int = 1,
    multi_node: int = 1,
) -> str:
    """A formula keeping ``ceil(pending tasks / task_slots_per_node)`` nodes, clamped to [min, max].

    ``$PendingTasks`` is active plus running tasks, so nodes busy with a task are counted and a scale-down
    only gives up nodes with nothing left to do. (Counting queued tasks alone would let nodes go as soon
    as their last task ends, but would hold the pool in a resize for as long as its longest task runs.)
    ``$NodeDeallocationOption = taskcompletion``: a node picked while it still runs a task finishes it
    first; ``requeue`` would kill that work and run it again, ``retaineddata`` would keep the node, paid,
    until its tasks' retention time is over (7 days by default).

    The count is the larger of the last sample and the mean of the samples of ``sample_window`` (the
    last two by default): nodes come at the first evaluation that sees the tasks and go at the first one
    that sees them done. The mean bridges a shorter dip - one Airflow task's job done and the next one's
    tasks not yet added, a sample the service did not record - as the Batch documentation advises
    against relying on ``GetSample(1)`` alone; it costs one more interval of nodes only when an
    evaluation falls within the window after the work ends (1 evaluation in 5). A long window is paid
    after every burst: the 3-minute mean this formula used before (the documentation's example takes 5)
    kept ``ceil`` of the mean, often most of a burst's nodes, for a whole further interval.
    ``bench/autoscale.py`` measures both (bench/autoscale-results.md).

    ``multi_node``: the most nodes one task of the pool needs at once (a multi-instance task). While anything
    is pending the target is at least that many, and ``min_nodes`` when nothing is, so a pool made for a
    nightly multi-node job holds no node once it is done. Batch counts a queued multi-instance task as its
    number of instances in ``$ActiveTasks`` ("For a multi-instance task, $ActiveTasks will include the number of
    instances set on the task", https://learn.microsoft.com/azure/batch/batch-automatic-scaling), which would
    give it all its nodes; the documentation does not say how ``$RunningTasks`` counts one once it runs, and
    the floor keeps its nodes whichever way it does (and if a queued one were ever counted once). Versions
    before 0.5.0 made ``multi_node`` the minimum instead: those nodes stayed allocated for good.

    On Spot nodes (``low_priority``) a preempted node is still one of the pool's (``$CurrentLowPriorityNodes``
    counts it) but runs nothing until Azure has capacity again, keeping its id: while tasks are pending the
    target asks for one more Spot node for each preempted one (``$PreemptedNodeCount``, at most ``max_nodes``
    more), so the work goes on where Azure has capacity; with nothing pending preempted nodes go with the rest.
    A preempted node is not billed (its VM is deleted), so the extra target costs nothing until a node comes.

    Time scales: Batch records a sample about every 30 s and evaluates the formula every 5 minutes at
    most often (the interval the provider sets), about 10 new samples per evaluation. The window is a
    count of samples (``GetSample(2)``), not a time range (``GetSample(TimeInterval_Minute * 1)``), so it
    means the same wherever samples come faster: the local Batch service samples every second, and with
    ``--autoscale-interval 10`` it is Azure's time scale compressed 30 times - where a time range would
    span 30 times more samples and evaluations than on Azure. A count asks for no sample percentage, so
    the documentation's 70% guard is not needed: right after creation it uses whatever samples exist.
    ``sample_window`` is Azure time, a whole number of 30-second samples.

    With ``low_priority`` the target is Spot nodes and dedicated is 0; otherwise the reverse.
    """
    _check_formula_inputs(max_nodes, min_nodes, low_priority, sample_window, task_slots_per_node, multi_node)
    samples = sample_window // SAMPLE_PERIOD
    recent = f", avg($PendingTasks.GetSample({samples}))" if samples > 1 else ""
    scaled, idle = (
        ("$TargetLowPriorityNodes", "$TargetDedicatedNodes")
        if low_priority
        else ("$TargetDedicatedNodes", "$TargetLowPriorityNodes")
    )
    lines = [f"$tasks = max(0, $PendingTasks.GetSample(1){recent});"]
    if multi_node > 1:
        lines.append(f"$tasks = $tasks > 0 ? max($tasks, {multi_node}) : 0;")
    lines += [
        f"$nodes = ceil($tasks / {task_slots_per_node});",
        f"{scaled} = max({min_nodes}, min($nodes, {max_nodes}));",
    ]
    if low_priority:
        lines.append(f"{scaled} = {scaled} + ($nodes > 0 ? min($PreemptedNodeCount.GetSample(1), {max_nodes}) : 0);")
    lines += [f"{idle} = 0;", "$NodeDeallocationOption = taskcompletion;"]
    return "\n".join(lines)


def _check_formula_inputs(
    max_nodes: int,
    min_nodes: int,
    low_priority: bool,
    sample_window: timedelta,
    task_slots_per_node: int,
    multi_node: int,
) -> None:
    """What Batch accepts, and what the formula can express (see autoscale_formula)."""
    check_node_bounds(max_nodes, min_nodes, prefix="autoscale")
    _check_count("autoscale.task_slots_per_node", task_slots_per_node, 1, MAX_TASK_SLOTS_PER_NODE)
    _check_count("autoscale.multi_node", multi_node, 1, max_nodes)
    if multi_node > 1 and task_slots_per_node != 1:
        raise InvalidAutoscaleError(
            f"autoscale.multi_node={multi_node} needs task_slots_per_node=1 (Batch runs multi-instance tasks only "
            f"on pools with one task slot per node), got {task_slots_per_node}"
        )
    if not isinstance(low_priority, bool):
        raise InvalidAutoscaleError(f"autoscale.low_priority must be True or False, got {low_priority!r}")
    if (
        not isinstance(sample_window, timedelta)
        or sample_window < SAMPLE_PERIOD
        or sample_window % SAMPLE_PERIOD != timedelta(0)
    ):
        raise InvalidAutoscaleError(
            "autoscale.sample_window must be a timedelta of whole 30-second samples (30 s, 1 min, 90 s, ...), "
            f"got {sample_window!r}"
        )


def iso8601_duration(value: timedelta) -> str:
    """``timedelta(minutes=5)`` -> ``"PT5M"``, the duration format of the Batch REST API."""
    if value < timedelta(0):
        raise InvalidAutoscaleError(f"a duration must not be negative, got {value!r}")
    hours, rest = divmod(value, timedelta(hours=1))
    minutes, rest = divmod(rest, timedelta(minutes=1))
    seconds = rest.total_seconds()
    text = "PT"
    if hours:
        text += f"{hours}H"
    if minutes:
        text += f"{minutes}M"
    if seconds or text == "PT":
        text += f"{seconds:.6f}".rstrip("0").rstrip(".") + "S"
    return text


_ISO_DURATION = re.compile(
    r"P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_iso8601_duration(text: str) -> timedelta | None:
    """``"PT5M"`` -> ``timedelta(minutes=5)``; None for what is not such a duration."""
    match = _ISO_DURATION.fullmatch(text.strip())
    if match is None or not any(match.groupdict().values()):
        return None
    parts = {name: float(value or 0) for name, value in match.groupdict().items()}
    return timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])


@dataclass(frozen=True)
class AutoscaleSettings:
    """An autoscale formula and how often Batch evaluates it (5 minutes to 168 hours)."""

    formula: str
    evaluation_interval: timedelta = MIN_EVALUATION_INTERVAL

    def __post_init__(self) -> None:
        if not isinstance(self.formula, str) or not self.formula.strip():
            raise InvalidAutoscaleError(f"autoscale.formula must be a non-empty string, got {self.formula!r}")
        interval = self.evaluation_interval
        if not isinstance(interval, timedelta) or not (MIN_EVALUATION_INTERVAL <= interval <= MAX_EVALUATION_INTERVAL):
            raise InvalidAutoscaleError(
                "autoscale.evaluation_interval must be between 5 minutes and 168 hours "
                f"(the range the Batch service accepts), got {interval!r}"
            )

    @property
    def evaluation_interval_iso(self) -> str:
        return iso8601_duration(self.evaluation_interval)

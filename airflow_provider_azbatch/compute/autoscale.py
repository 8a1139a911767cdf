"""Batch autoscale formulas that size a pool by its pending tasks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from airflow_provider_azbatch.compute.errors import InvalidAutoscaleError

# Limits the Batch service enforces (REST API autoScaleEvaluationInterval / taskSlotsPerNode).
MIN_EVALUATION_INTERVAL = timedelta(minutes=5)
MAX_EVALUATION_INTERVAL = timedelta(hours=168)
MAX_TASK_SLOTS_PER_NODE = 256
# Batch samples its metrics about every 30 seconds; a shorter look-back holds almost no samples.
MIN_SAMPLE_WINDOW = timedelta(minutes=1)
# Share of the window's samples below which the history is too thin to average (as in the Batch docs).
SAMPLE_PERCENT_THRESHOLD = 70


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


def _interval_expression(window: timedelta) -> str:
    seconds = window.total_seconds()
    if seconds % 60 == 0:
        return f"TimeInterval_Minute * {int(seconds // 60)}"
    return f"TimeInterval_Second * {int(seconds)}"


def autoscale_formula(
    max_nodes: int,
    *,
    min_nodes: int = 0,
    low_priority: bool = False,
    sample_window: timedelta = timedelta(minutes=3),
    task_slots_per_node: int = 1,
) -> str:
    """A formula keeping ``ceil(pending tasks / task_slots_per_node)`` nodes, clamped to [min, max].

    ``$PendingTasks`` is active plus running tasks, so nodes busy with a task are still counted.
    Right after pool creation the service may hold few or no samples, so - as in the Batch autoscale
    documentation - the last sample alone is used until ``sample_window`` is at least 70% covered,
    and afterwards the larger of the last sample and the window's average (scale up at once, scale
    down smoothly). ``$NodeDeallocationOption = taskcompletion`` lets running tasks finish before a
    node is removed. With ``low_priority`` the target is spot/low-priority nodes and dedicated is 0;
    otherwise the reverse.
    """
    check_node_bounds(max_nodes, min_nodes, prefix="autoscale")
    _check_count("autoscale.task_slots_per_node", task_slots_per_node, 1, MAX_TASK_SLOTS_PER_NODE)
    if not isinstance(low_priority, bool):
        raise InvalidAutoscaleError(f"autoscale.low_priority must be True or False, got {low_priority!r}")
    if not isinstance(sample_window, timedelta) or sample_window < MIN_SAMPLE_WINDOW or sample_window.microseconds:
        raise InvalidAutoscaleError(
            f"autoscale.sample_window must be a timedelta of whole seconds, at least 1 minute, got {sample_window!r}"
        )
    window = _interval_expression(sample_window)
    scaled, idle = (
        ("$TargetLowPriorityNodes", "$TargetDedicatedNodes")
        if low_priority
        else ("$TargetDedicatedNodes", "$TargetLowPriorityNodes")
    )
    return "\n".join(
        [
            f"$samples = $PendingTasks.GetSamplePercent({window});",
            f"$tasks = $samples < {SAMPLE_PERCENT_THRESHOLD} ? max(0, $PendingTasks.GetSample(1)) : "
            f"max($PendingTasks.GetSample(1), avg($PendingTasks.GetSample({window})));",
            f"$nodes = ceil($tasks / {task_slots_per_node});",
            f"{scaled} = max({min_nodes}, min($nodes, {max_nodes}));",
            f"{idle} = 0;",
            "$NodeDeallocationOption = taskcompletion;",
        ]
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

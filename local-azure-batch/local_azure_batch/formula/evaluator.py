"""Running a formula once, as an autoscale evaluation: service variables in, target node counts out."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from local_azure_batch.lang.times import aware

from .errors import EVALUATION_ERROR, Failure, Stop, to_error
from .parser import parse
from .samples import SampleHistory, SampleReader
from .syntax import Statement
from .values import Value, format_number, format_value, type_name
from .vocabulary import (
    ALIASES,
    DEALLOCATION,
    DEALLOCATION_OPTIONS,
    SAMPLED_VARIABLES,
    TARGET_DEDICATED,
    TARGET_LOW_PRIORITY,
    WRITABLE,
)


@dataclass
class AutoScaleOutcome:
    target_dedicated_nodes: int
    target_low_priority_nodes: int
    node_deallocation_option: str
    results: str


class Run:
    """The state of one evaluation: user variables, and service variables as the formula assigns them."""

    def __init__(
        self,
        history: SampleHistory,
        now: datetime,
        current: Mapping[str, float],
        sample_period: timedelta,
    ) -> None:
        self.now = aware(now)
        self.samples = SampleReader(history, self.now, sample_period)
        self.current = current
        self.user_values: dict[str, Value] = {}
        self.service_values: dict[str, Value] = {}
        self.alias_values: dict[str, Value] = {}
        self.assigned_at: dict[str, int] = {}

    # Service variables start at their current values and change as the formula assigns them.
    def current_number(self, name: str, default: float) -> float:
        value = self.current.get(name, self.current.get(name.lstrip("$")))
        return default if value is None else float(value)

    def read_service_variable(self, name: str) -> Value:
        name = ALIASES.get(name, name)
        if name in self.service_values:
            return self.service_values[name]
        alias = next((alias for alias, full in ALIASES.items() if full == name), None)
        if alias is not None and alias in self.alias_values:
            return self.alias_values[alias]
        if name == DEALLOCATION:
            return "requeue"
        if name in SAMPLED_VARIABLES:
            samples = self.samples.samples(name)
            fallback = samples[-1][1] if samples else 0.0
            return self.current_number(name, fallback)
        if name == "$TaskSlotsPerNode":
            return self.current_number(name, 1.0)
        return self.current_number(name, 0.0)

    def assign(self, statement: Statement, value: Value) -> None:
        target = statement.target
        assert target is not None
        if target == DEALLOCATION:
            if not isinstance(value, str) or value.lower() not in DEALLOCATION_OPTIONS:
                shown = value if isinstance(value, str) else f"a {type_name(value)}"
                raise Failure(
                    EVALUATION_ERROR,
                    statement.pos,
                    f"{DEALLOCATION} must be one of {', '.join(DEALLOCATION_OPTIONS)}, not {shown}",
                )
            self.service_values[target] = value.lower()
            return
        if target in WRITABLE or target in ALIASES:
            if not isinstance(value, float):
                raise Failure(
                    EVALUATION_ERROR,
                    statement.pos,
                    f"{target} must be assigned a double, not a {type_name(value)}",
                )
            store = self.alias_values if target in ALIASES else self.service_values
            store[target] = value
            self.assigned_at[target] = statement.pos
            return
        self.user_values[target] = value

    def final_target(self, name: str) -> int:
        value = self.read_service_variable(name)
        assert isinstance(value, float)
        if not math.isfinite(value):
            alias = next(alias for alias, full in ALIASES.items() if full == name)
            pos = self.assigned_at.get(name, self.assigned_at.get(alias))
            raise Failure(
                EVALUATION_ERROR,
                pos,
                f"{name} evaluated to {format_number(value)}; a target node count must be a finite number",
            )
        # Negative targets mean none; fractional ones are truncated like a cast to int.
        return int(max(0.0, value))


def validate_formula(formula: str) -> None:
    """Reject a formula the way enabling autoscale does: length, statement count, syntax, support."""
    try:
        parse(formula)
    except Failure as failure:
        raise to_error(formula, failure) from None


def evaluate_formula(
    formula: str,
    history: SampleHistory,
    *,
    now: datetime,
    current: Mapping[str, float],
    sample_period: timedelta = timedelta(seconds=30),
) -> AutoScaleOutcome:
    """Run ``formula`` once, as an autoscale evaluation at ``now``.

    ``current`` holds the pool's present values (``$TargetDedicatedNodes``,
    ``$CurrentDedicatedNodes``, ...); service variables start from them. ``sample_period`` is how
    often ``history`` is sampled, which is what sample percentages are measured against.
    """
    if sample_period <= timedelta(0):
        raise ValueError("sample_period must be positive")
    try:
        program = parse(formula)
        run = Run(history, now, current, sample_period)
        try:
            for statement in program:
                value = statement.expression.evaluate(run)
                if statement.target is not None:
                    run.assign(statement, value)
        except Stop:
            pass
        dedicated = run.final_target(TARGET_DEDICATED)
        low_priority = run.final_target(TARGET_LOW_PRIORITY)
    except Failure as failure:
        raise to_error(formula, failure) from None
    option = run.read_service_variable(DEALLOCATION)
    assert isinstance(option, str)
    parts = [
        f"{TARGET_DEDICATED}={dedicated}",
        f"{TARGET_LOW_PRIORITY}={low_priority}",
        f"{DEALLOCATION}={option}",
    ]
    # Sorted by name: the documented results list $curTime, $isWeekday, $isWorkingWeekdayHour,
    # $workHours for a formula that assigns them in another order.
    parts.extend(f"{name}={format_value(run.user_values[name])}" for name in sorted(run.user_values))
    return AutoScaleOutcome(
        target_dedicated_nodes=dedicated,
        target_low_priority_nodes=low_priority,
        node_deallocation_option=option,
        results=";".join(parts),
    )

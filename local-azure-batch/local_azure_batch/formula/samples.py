"""Sampled service variables ($PendingTasks, ...) and their methods: GetSample, GetSamplePercent,
GetSamplePeriod, Count and HistoryBeginTime."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from local_azure_batch.lang.times import aware

from .errors import EVALUATION_ERROR, INSUFFICIENT_SAMPLE_DATA, Failure
from .values import Interval, Value, format_number, type_name


@dataclass(frozen=True)
class Sample:
    at: datetime
    value: float


class SampleHistory(Protocol):
    def samples(self, variable: str) -> Sequence[Sample]:
        """Samples of ``variable`` (e.g. ``"$PendingTasks"``), oldest first."""
        ...


class SampleReader:
    """One evaluation's view of the history: samples up to ``now``, each variable fetched once."""

    def __init__(self, history: SampleHistory, now: datetime, sample_period: timedelta) -> None:
        self.history = history
        self.now = now
        self.sample_period = sample_period.total_seconds()
        self._samples: dict[str, list[tuple[datetime, float]]] = {}

    def samples(self, variable: str) -> list[tuple[datetime, float]]:
        cached = self._samples.get(variable)
        if cached is None:
            cached = []
            for sample in self.history.samples(variable):
                at = aware(sample.at)
                if at <= self.now:
                    cached.append((at, float(sample.value)))
            self._samples[variable] = cached
        return cached

    def call(self, variable: str, method: str, pos: int, args: list[Value]) -> Value:
        if method == "Count":
            return float(len(self.samples(variable)))
        if method == "GetSamplePeriod":
            return Interval(self.sample_period)
        if method == "HistoryBeginTime":
            samples = self.samples(variable)
            if not samples:
                raise Failure(
                    INSUFFICIENT_SAMPLE_DATA, pos, f"Insufficient data from data set: {variable} has no samples yet"
                )
            return samples[0][0]
        if method == "GetSamplePercent":
            return self._window(variable, method, pos, args)[1]
        return self._get_sample(variable, pos, args)

    def _get_sample(self, variable: str, pos: int, args: list[Value]) -> Value:
        if len(args) == 1 and isinstance(args[0], float):
            return self._last_samples(variable, pos, args[0])
        percent = 0.0
        if len(args) >= 2 and isinstance(args[-1], float):
            percent = args[-1]
            args = args[:-1]
            if math.isnan(percent) or not 0 <= percent <= 100:
                raise Failure(
                    EVALUATION_ERROR,
                    pos,
                    f"{variable}.GetSample() needs a sample percentage between 0 and 100, not {format_number(percent)}",
                )
        if len(args) > 2:
            raise Failure(
                EVALUATION_ERROR,
                pos,
                f"{variable}.GetSample() takes (count), (start[, percent]) or (start, end[, percent])",
            )
        values, received = self._window(variable, "GetSample", pos, args)
        if received < percent:
            raise Failure(
                INSUFFICIENT_SAMPLE_DATA,
                pos,
                f"Insufficient data from data set: {variable} wanted {format_number(percent)}%, "
                f"received {math.floor(received)}%",
            )
        return tuple(values)

    def _bound(self, variable: str, method: str, pos: int, value: Value) -> datetime:
        """A look-back interval or a timestamp as an absolute time."""
        if isinstance(value, Interval):
            return self.now - timedelta(seconds=value.seconds)
        if isinstance(value, datetime):
            return aware(value)
        raise Failure(
            EVALUATION_ERROR,
            pos,
            f"{variable}.{method}() takes a timeinterval or a timestamp here, not a {type_name(value)}",
        )

    def _window(self, variable: str, method: str, pos: int, args: list[Value]) -> tuple[list[float], float]:
        """Values inside (start, end] and their percentage of the samples expected there."""
        ends = [self._bound(variable, method, pos, arg) for arg in args]
        if len(ends) == 1:
            ends.append(self.now)
        start, end = min(ends), max(ends)
        values = [value for at, value in self.samples(variable) if start < at <= end]
        expected = max(1, math.floor((end - start).total_seconds() / self.sample_period + 1e-9))
        return values, min(100.0, 100.0 * len(values) / expected)

    def _last_samples(self, variable: str, pos: int, count: float) -> tuple[float, ...]:
        # "GetSample(double count): the number of samples to obtain from the most recent".
        if not math.isfinite(count) or int(count) < 1:
            raise Failure(
                EVALUATION_ERROR,
                pos,
                f"{variable}.GetSample() needs a count of at least 1, not {format_number(count)}",
            )
        samples = self.samples(variable)
        if not samples:
            # Undocumented. Failing (rather than returning []) keeps a pool from scaling on no data:
            # max(0, min(4, [])) would otherwise read as 4.
            raise Failure(
                INSUFFICIENT_SAMPLE_DATA,
                pos,
                f"Insufficient data from data set: {variable} wanted {int(count)} "
                f"sample{'s' if int(count) != 1 else ''}, received 0",
            )
        return tuple(value for _at, value in samples[-int(count) :])

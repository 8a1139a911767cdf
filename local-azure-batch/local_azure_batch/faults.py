"""Fault injection for resilience testing: throttling, server errors, dropped connections, latency.

Spec (``--faults`` or ``PUT /_emulator/faults``): rules separated by ``;``, each
``OPERATIONS:ACTION[@RATE][#SCHEDULE]``:

- ``OPERATIONS``: ``*`` or REST operation ids joined by ``|`` (``Jobs_GetJobTaskCounts|Tasks_GetTaskFile``);
- ``ACTION``: ``429`` or ``503`` (with ``Retry-After``, default 1 s, change with ``/retry-after=SECONDS``),
  ``500``, ``403`` (``AuthorizationFailure``, as the service refuses a credential whose role lacks that read:
  a credential allowed some operations and not others), ``drop`` (close the connection without a response,
  before the request is processed),
  ``drop-after`` (process the request, then close the connection without a response: the client cannot
  tell whether its request took effect) or ``latency=SECONDS``;
- ``@RATE``: a probability from 0 to 1 (default: every matching request);
- ``#SCHEDULE``: which matching requests, counted from 1 per rule: ``#1``, ``#2-4``, ``#1,3,5-``.

Example: ``Jobs_GetJobTaskCounts:503#1-2;Tasks_GetTaskFile:latency=0.5@0.2``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field


class FaultSpecError(ValueError):
    pass


@dataclass
class FaultRule:
    operations: frozenset[str] | None
    action: str
    retry_after: float = 1.0
    latency: float = 0.0
    rate: float | None = None
    schedule: list[tuple[int, int | None]] | None = None
    seen: int = 0
    text: str = ""

    def matches(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations

    def fires(self, rng: random.Random) -> bool:
        self.seen += 1
        if self.schedule is not None and not any(
            start <= self.seen and (end is None or self.seen <= end) for start, end in self.schedule
        ):
            return False
        return self.rate is None or rng.random() < self.rate


@dataclass
class FaultDecision:
    latency: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    drop: bool = False
    drop_after: bool = False


_NO_FAULT = FaultDecision()


@dataclass
class FaultInjector:
    rules: list[FaultRule] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    spec: str = ""

    @classmethod
    def parse(cls, spec: str, known_operations: Iterable[str], seed: int | None = None) -> FaultInjector:
        known = set(known_operations)
        rules = [_parse_rule(text.strip(), known) for text in spec.split(";") if text.strip()]
        return cls(rules=rules, rng=random.Random(seed), spec=spec)

    def decide(self, operation: str) -> FaultDecision:
        if not self.rules:
            return _NO_FAULT
        decision = FaultDecision()
        for rule in self.rules:
            if not rule.matches(operation) or not rule.fires(self.rng):
                continue
            if rule.action == "latency":
                decision.latency += rule.latency
            elif decision.status is None and not decision.drop and not decision.drop_after:
                if rule.action == "drop":
                    decision.drop = True
                elif rule.action == "drop-after":
                    decision.drop_after = True
                else:
                    decision.status = int(rule.action)
                    if rule.action in ("429", "503"):
                        decision.retry_after = rule.retry_after
        return decision


def _parse_rule(text: str, known: set[str]) -> FaultRule:
    if ":" not in text:
        raise FaultSpecError(f"fault rule {text!r}: expected OPERATIONS:ACTION, e.g. Jobs_GetJob:503")
    operations_text, rest = text.split(":", 1)
    schedule = None
    rate = None
    if "#" in rest:
        rest, schedule_text = rest.split("#", 1)
        schedule = _parse_schedule(schedule_text, text)
    if "@" in rest:
        rest, rate_text = rest.split("@", 1)
        try:
            rate = float(rate_text)
        except ValueError:
            raise FaultSpecError(f"fault rule {text!r}: rate {rate_text!r} is not a number from 0 to 1") from None
        if not 0 <= rate <= 1:
            raise FaultSpecError(f"fault rule {text!r}: rate must be from 0 to 1, got {rate}")
    operations: frozenset[str] | None = None
    if operations_text.strip() != "*":
        names = {name.strip() for name in operations_text.split("|") if name.strip()}
        unknown = sorted(names - known)
        if unknown or not names:
            raise FaultSpecError(
                f"fault rule {text!r}: unknown operation(s) {', '.join(unknown) or '(none)'}; "
                f"use * or one of: {', '.join(sorted(known))}"
            )
        operations = frozenset(names)
    action, _, option = rest.strip().partition("/")
    rule = FaultRule(operations=operations, action=action, rate=rate, schedule=schedule, text=text)
    if action in ("429", "503"):
        if option:
            key, _, value = option.partition("=")
            if key != "retry-after":
                raise FaultSpecError(f"fault rule {text!r}: unknown option {option!r} (use retry-after=SECONDS)")
            rule.retry_after = _seconds(value, text)
    elif action.startswith("latency="):
        rule.action = "latency"
        rule.latency = _seconds(action.split("=", 1)[1], text)
    elif action not in ("500", "403", "drop", "drop-after"):
        raise FaultSpecError(
            f"fault rule {text!r}: action must be 429, 503, 500, 403, drop, drop-after or latency=SECONDS"
        )
    return rule


def _seconds(value: str, text: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise FaultSpecError(f"fault rule {text!r}: {value!r} is not a number of seconds") from None
    if seconds < 0:
        raise FaultSpecError(f"fault rule {text!r}: seconds must not be negative")
    return seconds


def _parse_schedule(schedule_text: str, text: str) -> list[tuple[int, int | None]]:
    out: list[tuple[int, int | None]] = []
    for part in schedule_text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                start_text, end_text = part.split("-", 1)
                out.append((int(start_text), int(end_text) if end_text else None))
            else:
                out.append((int(part), int(part)))
        except ValueError:
            raise FaultSpecError(f"fault rule {text!r}: schedule part {part!r} is not N, N-M or N-") from None
    return out

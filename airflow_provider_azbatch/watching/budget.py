"""How many quiet output streams may be looked at, for watches that share a process. No I/O.

A look at a quiet stream (a task whose output did not grow at its last look, or that was never looked at)
is one file listing. One job needs few, but a triggerer running a thousand jobs of twenty streamed tasks
each would spend its time listing files that do not change. The triggerer's watches share one budget of
such looks per second; streams that grew are looked at every poll, outside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Unlimited:
    """One watch on its own (the operator's sync wait): every due look is made."""

    def grant(self, wanted: int, now: float) -> int:
        return wanted


@dataclass
class TokenBucket:
    """``rate`` looks a second on average, at most ``burst`` at once."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    last: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def grant(self, wanted: int, now: float) -> int:
        if self.last is not None and now > self.last:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now if self.last is None else max(self.last, now)
        granted = min(wanted, int(self.tokens + 1e-9))
        self.tokens -= granted
        return granted

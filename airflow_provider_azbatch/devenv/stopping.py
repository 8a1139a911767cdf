"""Ctrl-C (SIGINT) and SIGTERM end the environment: they raise :class:`Stopped` in the main thread, so that
every ``finally`` stops what was started. While a child is being started and registered the signal waits
(:func:`signals_deferred`): it cannot leave a child nobody knows about. Signals are not blocked for that, as
a blocked mask would be inherited by the children, which then could not be stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Deferral:
    depth = 0
    pending: int | None = None


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _Deferral.depth:
        _Deferral.pending = signum
        return
    raise Stopped(signum)


@contextlib.contextmanager
def signals_stop() -> Iterator[None]:
    """In the block, SIGINT and SIGTERM raise :class:`Stopped`; the previous handlers are back after it."""
    previous = {signum: signal.signal(signum, _on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def ignore() -> None:
    """While stopping: a second Ctrl-C must not cut the stopping short (it ends within a bounded time)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """A signal arriving in the block raises :class:`Stopped` when the block ends."""
    _Deferral.depth += 1
    try:
        yield
    finally:
        _Deferral.depth -= 1
    if not _Deferral.depth and _Deferral.pending is not None:
        signum, _Deferral.pending = _Deferral.pending, None
        raise Stopped(signum)

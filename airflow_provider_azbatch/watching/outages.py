"""How a wait rides out a flaky Batch service: the same rule for the worker's loop and the trigger. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_azbatch.hooks.errors import describe_error, is_transient, retry_after_seconds
from airflow_provider_azbatch.retries import Backoff, Outage

DEFAULT_MAX_OUTAGE_SECONDS = 600.0


class WaitFailed(Exception):
    """The wait cannot go on: a permanent error (auth, job deleted) or an outage longer than allowed."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass
class OutagePolicy:
    """Transient errors (throttling, 5xx, dropped connections) are waited out with backoff honouring
    ``Retry-After``, for at most ``max_outage`` seconds in a row; anything else ends the wait at once."""

    job_id: str
    max_outage: float = DEFAULT_MAX_OUTAGE_SECONDS
    backoff: Backoff = field(default_factory=Backoff)
    outage: Outage = field(init=False)

    def __post_init__(self) -> None:
        self.outage = Outage(self.max_outage)

    def delay_after(self, exc: BaseException, now: float) -> float:
        """Seconds to wait before the next poll, or :class:`WaitFailed`."""
        cause = describe_error(exc)
        if not is_transient(exc):
            raise WaitFailed(f"Batch job {self.job_id}: {cause}", permanent=True)
        lasted = self.outage.failed(now)
        if self.outage.too_long(now):
            raise WaitFailed(
                f"Batch job {self.job_id}: the Batch service kept failing for {int(lasted)} s "
                f"(max_outage {int(self.max_outage)} s); last error: {cause}",
                permanent=False,
            )
        return self.backoff.next_delay(retry_after_seconds(exc))

    def succeeded(self) -> None:
        self.outage.recovered()
        self.backoff.reset()

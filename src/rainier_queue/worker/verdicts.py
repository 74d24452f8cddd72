# SPDX-License-Identifier: MIT
"""What became of one run of a job: the verdict, and the attempt that carries it to the settle.

Why a module of its own: the runner (`runner.py`) reaches a verdict, the
settle (`settle.py`) carries it out, and the loop, the cancels and the
outcome records read it. Each of them imports these types from here
rather than from the runner, whose subject is running a handler.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta

from ..context import JobContext
from ..instrument import Outcome
from ..job import Job
from ..queue import Reservation


class Verdict(enum.Enum):
    """What became of one attempt."""

    SUCCEEDED = "succeeded"
    RAISED = "raised"
    """The handler raised: retry, or fail on the last attempt."""
    TIMED_OUT = "timed out"
    """Settled like RAISED, with a `JobTimeout`."""
    RETRY = "retry"
    """The handler raised `Retry`: try again after its delay."""
    UNRUNNABLE = "unrunnable"
    """Unknown name or unfit payload: fail at once."""
    EXHAUSTED = "exhausted"
    """Delivered more often than allowed: fail at once."""
    INTERRUPTED = "interrupted"
    """Stopped by a worker shutdown: hand it back with the attempt refunded."""
    ABANDONED = "abandoned"
    """A plain `def` handler still running in its thread after a stop interrupted it:
    left reserved, not settled, so no one else starts it while the thread may run."""
    CANCELLED = "cancelled"
    """Someone cancelled the job (`QueueManager.cancel`) before or while it ran:
    acknowledged and recorded as cancelled, neither failed nor retried."""


@dataclass(slots=True, kw_only=True, eq=False)
class Attempt:
    """One reservation's run, ready to be settled.

    Not frozen, though nothing changes one once built (`dataclasses.replace`
    makes a new one): one is built per job, and a frozen class's `__init__`
    pays a call of `object.__setattr__` per field.
    """

    reservation: Reservation
    verdict: Verdict
    context: JobContext
    job: Job | None = None
    """None when the job could not be built (UNRUNNABLE)."""
    error: BaseException | None = None
    retry_delay: timedelta | None = None
    """Only for RETRY: the delay the handler asked for, if any."""
    timeout: timedelta | None = None
    """The limit the handler ran under (the failed hook gets the same)."""
    started: float = 0.0
    """Monotonic time just before the run."""
    value: object = None
    """What the handler returned (SUCCEEDED only); kept only if its class asks."""
    before_start: bool = False
    """CANCELLED only: the job was cancelled before its handler started, and never ran."""

    @property
    def number(self) -> int:
        """Which delivery this was (1 on the first)."""
        return self.context.attempt

    @property
    def is_last(self) -> bool:
        """Whether a failure now is final."""
        return self.context.is_last_attempt


def outcome_of(attempt: Attempt) -> Outcome:
    """What the settle will do with `attempt`, as the instruments name it (`settle.py` does it)."""
    verdict = attempt.verdict
    if verdict is Verdict.SUCCEEDED:
        return "succeeded"
    if verdict is Verdict.INTERRUPTED or verdict is Verdict.ABANDONED:
        return "interrupted"
    if verdict is Verdict.CANCELLED:
        return "cancelled"
    if verdict is Verdict.UNRUNNABLE or verdict is Verdict.EXHAUSTED or attempt.is_last:
        return "failed"
    return "retried"


__all__ = ["Attempt", "Verdict", "outcome_of"]

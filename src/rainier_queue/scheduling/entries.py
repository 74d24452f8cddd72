# SPDX-License-Identifier: MIT
"""`ScheduledJob`: one checked schedule entry, and the policies it can choose.

An entry is plain, frozen data once `Schedule.check()` has built it, so
the scheduler can share it between passes and processes read it the same
way; everything that can be wrong with it was reported before it exists.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from ..job import Job
from .timing import Timing

CatchUp = Literal["latest", "all", "skip"]
"""After downtime: run once for the missed ticks, run each (bounded), or run none."""
Overlap = Literal["allow", "skip", "queue"]
"""While the previous run's job is still queued or running: enqueue anyway, skip the
tick, or hold it back until that job has settled."""

Condition = Callable[..., bool | Awaitable[bool]]
"""`when` / `skip` predicates: called with the tick's time, or with nothing."""

CATCH_UP_CHOICES: tuple[str, ...] = get_args(CatchUp)
OVERLAP_CHOICES: tuple[str, ...] = get_args(Overlap)
DEFAULT_CATCH_UP_LIMIT = 100
DEFAULT_GRACE = timedelta(minutes=1)
DEFAULT_OVERLAP_FOR = timedelta(hours=6)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledJob:
    """One checked entry: what to enqueue, when, and what to do about late or busy ticks."""

    name: str
    """Stable: the key of this entry's claims and outcomes in the shared store."""
    job: Job
    """Enqueued as it is at every tick (its payload does not change between ticks)."""
    timing: Timing
    description: str | None = None
    catch_up: CatchUp = "latest"
    catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT
    """With `catch_up="all"`, at most this many missed ticks are enqueued, the newest."""
    overlap: Overlap = "allow"
    overlap_for: timedelta = DEFAULT_OVERLAP_FOR
    """How long an unsettled run holds off the next (a safety net; the worker that
    settles the run's job clears it at once)."""
    grace: timedelta = DEFAULT_GRACE
    """How late a tick may be seen and still count as on time (for `catch_up="skip"`
    and for a schedule's very first pass)."""
    queue: str | None = None
    connection: str | None = None
    delay: timedelta | None = None
    unique: str | None = None
    """A unique id: the run is dropped while a job of the same name and id waits,
    whoever dispatched it (as `Job.unique_id()`)."""
    conditions: tuple[tuple[bool, Condition], ...] = ()
    """(wanted, predicate): the tick runs only if each predicate returns `wanted`."""

    @property
    def job_name(self) -> str:
        return type(self.job).name

    async def conditions_hold(self, tick: datetime) -> bool:
        """Whether every `when` holds and no `skip` does, for the tick at `tick`."""
        for wanted, predicate in self.conditions:
            takes_tick = bool(inspect.signature(predicate).parameters)
            result = predicate(tick) if takes_tick else predicate()
            if inspect.isawaitable(result):
                result = await result
            if bool(result) is not wanted:
                return False
        return True


__all__ = [
    "CATCH_UP_CHOICES",
    "DEFAULT_CATCH_UP_LIMIT",
    "DEFAULT_GRACE",
    "DEFAULT_OVERLAP_FOR",
    "OVERLAP_CHOICES",
    "CatchUp",
    "Condition",
    "Overlap",
    "ScheduledJob",
]

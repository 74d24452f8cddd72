# SPDX-License-Identifier: MIT
"""Periodic jobs: cron and intervals that enqueue once per tick, from any number of processes.

Users of every Python job queue ask for the same thing: run this job every
night, once, even though the application runs on five machines. The usual
answers are a separate beat process that must never run twice (Celery
beat) or a lock that silently drops a tick when its holder is slow. Here
every scheduler process is equal and each tick is claimed in the
connection's own shared store, so one or many may run:

- `timing`: when ticks fall (cron in an IANA zone via cronsim, intervals);
- `entries`: `ScheduledJob`, one checked entry, and its policies;
- `builder`: `Entry`, an entry being written (the upstream's builders);
- `schedule`: `Schedule`, the entries checked together at start-up;
- `config`: entries from `[tool.rainier-queue.schedules]`;
- `claims`: the per-tick claims, cursor and outcomes in the shared store;
- `scheduler`: the passes and the loop that turn due ticks into jobs.

See docs/scheduling.md for the guarantees.
"""

from __future__ import annotations

from .builder import Entry
from .claims import Outcome
from .config import schedule_from_config
from .entries import ScheduledJob
from .schedule import Schedule, ScheduleProblems
from .scheduler import SCHEDULE_HEADER, TICK_HEADER, Overview, Scheduler, UnknownSchedule
from .timing import Cron, Every, ScheduleError, Timing

__all__ = [
    "SCHEDULE_HEADER",
    "TICK_HEADER",
    "Cron",
    "Entry",
    "Every",
    "Outcome",
    "Overview",
    "Schedule",
    "ScheduleError",
    "ScheduleProblems",
    "ScheduledJob",
    "Scheduler",
    "Timing",
    "UnknownSchedule",
    "schedule_from_config",
]

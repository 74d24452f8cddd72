# SPDX-License-Identifier: MIT
"""Periodic jobs: cron and intervals that enqueue once per tick, from any number of processes.

Users of every Python job queue ask for the same thing: run this job every
night, once, even though the application runs on five machines. The usual
answers are a separate beat process that must never run twice (Celery
beat) or a lock that silently drops a tick when its holder is slow. Here
every scheduler process is equal and each tick is claimed in the
connection's own shared store, so one or many may run:

- `timing`: when ticks fall (cron in an IANA zone via cronsim, intervals);
- `schedule`: the `Schedule` builder and its checked `ScheduledJob` entries;
- `config`: entries from `[tool.rainier-queue.schedules]`;
- `claims`: the per-tick claims, cursor and outcomes in the shared store;
- `scheduler`: the passes and the loop that turn due ticks into jobs.

See docs/scheduling.md for the guarantees.
"""

from __future__ import annotations

from .claims import Outcome
from .config import schedule_from_config
from .schedule import Entry, Schedule, ScheduledJob, ScheduleProblems
from .scheduler import SCHEDULE_HEADER, TICK_HEADER, Overview, Scheduler
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
    "schedule_from_config",
]

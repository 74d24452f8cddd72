# SPDX-License-Identifier: MIT
"""`Schedule`: the list of jobs to enqueue on a timetable, written in code.

A schedule is declared once, at import, and read by every scheduler
process; a mistake in it (a typo in an expression, two entries with one
name) must stop all of them at start-up with every problem listed, not
surface as one silent missing run a week later. So the builder never
raises while it is being written: each method records what is wrong, and
`Schedule.check()` reports it all at once, entry by entry.

```python
schedule = Schedule()
schedule.job(SendReport(team="ops")).daily_at("07:30").in_zone("Europe/Paris")
schedule.job(purge_tokens()).every(minutes=5).overlap("skip")

@schedule.cron("0 * * * *", description="hourly rollup")
@job(name="rollup")
async def rollup() -> None: ...
```

An entry's name is the key of its ticks' claims in the shared store, so
it must be stable: it defaults to the job's wire name, and `.named()`
gives a second entry of the same job a name of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from ..errors import QueueError
from ..job import Job, JobFunction
from ..registry import JobRegistry
from .builder import Entry
from .entries import ScheduledJob
from .timing import ScheduleError

T = TypeVar("T", bound="type[Job] | JobFunction[...]")

_OPTION_METHODS = {
    "name": "named",
    "zone": "in_zone",
    "description": "describe",
    "catch_up": "catch_up",
    "overlap": "overlap",
    "grace": "grace",
    "when": "when",
    "skip": "skip",
    "queue": "on_queue",
    "connection": "on_connection",
    "delay": "delay",
    "unique": "unique",
}
"""The keyword options of the `Schedule.cron` / `Schedule.every` decorators."""


class ScheduleProblems(ScheduleError):
    """Every problem found in the schedules, one per line, each naming its entry."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        listed = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"the schedule has {len(problems)} problem(s):\n{listed}")


class Schedule:
    """The entries to run, in declaration order. Checked as a whole by `check()`."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._built: list[ScheduledJob] = []

    def job(self, job: Job | JobFunction[...] | type[Job]) -> Entry:
        """A new entry enqueueing `job` (an instance; a job class or `@job` function is
        called with no arguments, so its fields need defaults)."""
        entry = Entry(None, repr(job))
        try:
            entry._job = _instance(job)
        except (TypeError, ValueError, QueueError) as exc:
            entry.errors.append(f"cannot build the job for {job!r} with no arguments: {exc}")
        self._entries.append(entry)
        return entry

    def add(self, scheduled: ScheduledJob) -> None:
        """An entry already built (the config file's, or another schedule's)."""
        self._built.append(scheduled)

    def extend(self, other: Schedule) -> None:
        """Add `other`'s entries after these (the config file's after the code's)."""
        self._entries.extend(other._entries)
        self._built.extend(other._built)

    def cron(self, expression: str, *, zone: str = "UTC", **options: object) -> Callable[[T], T]:
        """Decorate a `@job` function or `Job` class to run it on `expression`."""
        return self._decorator(lambda e: e.cron(expression).in_zone(zone), options)

    def every(self, interval: timedelta, **options: object) -> Callable[[T], T]:
        """Decorate a `@job` function or `Job` class to run it every `interval`."""
        return self._decorator(lambda e: e.every(interval), options)

    def _decorator(
        self, timing: Callable[[Entry], Entry], options: dict[str, object]
    ) -> Callable[[T], T]:
        def decorate(target: T) -> T:
            entry = timing(self.job(target))
            for key, value in options.items():
                method = _OPTION_METHODS.get(key)
                if method is None:
                    known = ", ".join(sorted(_OPTION_METHODS))
                    entry.errors.append(f"unknown schedule option `{key}` (options: {known})")
                    continue
                getattr(entry, method)(value)
            return target

        return decorate

    def problems(self, registry: JobRegistry | None = None) -> list[str]:
        """Everything wrong with the schedule; empty when it can run."""
        return self._check(registry)[1]

    def check(self, registry: JobRegistry | None = None) -> list[ScheduledJob]:
        """The checked entries, or `ScheduleProblems` listing every problem."""
        built, problems = self._check(registry)
        if problems:
            raise ScheduleProblems(problems)
        return built

    def _check(self, registry: JobRegistry | None) -> tuple[list[ScheduledJob], list[str]]:
        built: list[ScheduledJob] = []
        problems: list[str] = []
        for entry in self._entries:
            scheduled, wrong = entry.build()
            problems.extend(f"schedule `{entry.name}`: {p}" for p in wrong)
            if scheduled is not None:
                built.append(scheduled)
        built.extend(self._built)
        seen: dict[str, int] = {}
        for name in [entry.name for entry in self._entries] + [b.name for b in self._built]:
            seen[name] = seen.get(name, 0) + 1
        for scheduled in built:
            if registry is not None and not registry.knows(scheduled.job_name):
                problems.append(
                    f"schedule `{scheduled.name}`: job `{scheduled.job_name}` is not registered, "
                    "so no worker could run it"
                )
        for name, count in sorted(seen.items()):
            if count > 1:
                problems.append(
                    f"schedule `{name}` is declared {count} times; give each a name of its own "
                    "with .named() (the name keys its runs in the shared store)"
                )
        return built, problems

    def __len__(self) -> int:
        return len(self._entries) + len(self._built)


def _instance(job: Job | JobFunction[...] | type[Job]) -> Job:
    if isinstance(job, Job):
        return job
    if isinstance(job, JobFunction):
        return job()
    candidate: object = job
    if isinstance(candidate, type) and issubclass(candidate, Job):
        return candidate()
    raise TypeError(f"a schedule enqueues a Job, not {type(job).__name__}")


__all__ = ["Schedule", "ScheduleProblems"]

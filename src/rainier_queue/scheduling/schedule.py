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

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypeVar, get_args

from ..errors import QueueError
from ..job import Job, JobFunction
from ..registry import JobRegistry
from .timing import Cron, Every, ScheduleError, Timing, zone_named

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
_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

T = TypeVar("T", bound="type[Job] | JobFunction[...]")

_OPTION_METHODS = {
    "name": "named",
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


class Entry:
    """One entry being written; every method returns the entry, so calls chain.

    Nothing here raises: a bad value is recorded and reported by `Schedule.check()`.
    """

    def __init__(self, job: Job | None, origin: str) -> None:
        self._job = job
        self._origin = origin
        self._name: str | None = None
        self._fields = ["*", "*", "*", "*", "*"]
        self._cron: str | None = None
        self._interval: timedelta | None = None
        self._zone = "UTC"
        self._options: dict[str, object] = {}
        self._conditions: list[tuple[bool, Condition]] = []
        self.errors: list[str] = []

    # -- timing ----------------------------------------------------------------

    def cron(self, expression: str) -> Entry:
        """Fire on a cron expression (five fields, or `@daily` and the other shorthands)."""
        self._cron, self._interval = expression, None
        return self

    def every(
        self,
        interval: timedelta | None = None,
        *,
        seconds: float = 0,
        minutes: float = 0,
        hours: float = 0,
    ) -> Entry:
        """Fire every `interval` (or so many seconds/minutes/hours), counted from the epoch."""
        self._interval = (interval or timedelta(0)) + timedelta(
            seconds=seconds, minutes=minutes, hours=hours
        )
        self._cron = None
        return self

    def _set(
        self, minute: str, hour: str, dom: str = "*", month: str = "*", dow: str = "*"
    ) -> Entry:
        self._fields = [minute, hour, dom, month, dow]
        self._cron = self._interval = None
        return self

    def every_minute(self) -> Entry:
        return self._set("*", "*")

    def every_minutes(self, n: int) -> Entry:
        """Every `n` minutes from the top of the hour (`*/n`)."""
        if not 1 <= n <= 59:
            self.errors.append(f"every_minutes({n}): n must be from 1 to 59")
        return self._set(f"*/{n}", "*")

    def every_five_minutes(self) -> Entry:
        return self.every_minutes(5)

    def every_fifteen_minutes(self) -> Entry:
        return self.every_minutes(15)

    def every_thirty_minutes(self) -> Entry:
        return self.every_minutes(30)

    def hourly(self) -> Entry:
        return self._set("0", "*")

    def hourly_at(self, minute: int) -> Entry:
        return self._set(str(minute), "*")

    def daily(self) -> Entry:
        return self._set("0", "0")

    def daily_at(self, time: str) -> Entry:
        """Every day at `"HH:MM"` in the entry's zone."""
        hour, minute = self._clock(time)
        return self._set(minute, hour)

    def twice_daily(self, first: int = 1, second: int = 13) -> Entry:
        return self._set("0", f"{first},{second}")

    def weekly(self) -> Entry:
        """Sundays at midnight."""
        return self._set("0", "0", dow="0")

    def weekly_on(self, day: int | str, time: str = "00:00") -> Entry:
        hour, minute = self._clock(time)
        return self._set(minute, hour, dow=self._day(day))

    def monthly(self) -> Entry:
        return self._set("0", "0", dom="1")

    def monthly_on(self, day: int, time: str = "00:00") -> Entry:
        hour, minute = self._clock(time)
        return self._set(minute, hour, dom=str(day))

    def yearly(self) -> Entry:
        return self._set("0", "0", dom="1", month="1")

    def weekdays(self) -> Entry:
        """Only Monday to Friday (replaces the day-of-week field)."""
        return self.on_days(1, 2, 3, 4, 5)

    def weekends(self) -> Entry:
        return self.on_days(0, 6)

    def on_days(self, *days: int | str) -> Entry:
        """Only on these days of the week (0 or `"sun"` is Sunday)."""
        if self._cron is not None or self._interval is not None:
            self.errors.append(
                "on_days() narrows a builder timing such as daily_at(); it cannot change a "
                "cron expression or an interval (write the day-of-week into the expression)"
            )
            return self
        self._fields[4] = ",".join(self._day(d) for d in days)
        return self

    def in_zone(self, zone: str) -> Entry:
        """Read the timing in an IANA zone (`Europe/Paris`); daylight saving applies."""
        self._zone = zone
        return self

    timezone = in_zone

    # -- options ---------------------------------------------------------------

    def named(self, name: str) -> Entry:
        """The entry's stable name (default: the job's wire name)."""
        self._name = name
        return self

    def describe(self, description: str) -> Entry:
        self._options["description"] = description
        return self

    described_as = describe

    def catch_up(self, policy: str, *, limit: int = DEFAULT_CATCH_UP_LIMIT) -> Entry:
        """After downtime: `"latest"` (default), `"all"` (at most `limit`) or `"skip"`."""
        if policy not in CATCH_UP_CHOICES:
            self.errors.append(f"catch_up must be one of {', '.join(CATCH_UP_CHOICES)}")
        if limit < 1:
            self.errors.append("the catch-up limit must be at least 1")
        self._options.update(catch_up=policy, catch_up_limit=limit)
        return self

    def overlap(self, policy: str, *, hold_for: timedelta = DEFAULT_OVERLAP_FOR) -> Entry:
        """While the previous run's job is queued or running: `"allow"`, `"skip"`, `"queue"`."""
        if policy not in OVERLAP_CHOICES:
            self.errors.append(f"overlap must be one of {', '.join(OVERLAP_CHOICES)}")
        self._options.update(overlap=policy, overlap_for=hold_for)
        return self

    def without_overlapping(self, hold_for: timedelta = DEFAULT_OVERLAP_FOR) -> Entry:
        """The upstream's name for `overlap("skip")`."""
        return self.overlap("skip", hold_for=hold_for)

    def grace(self, grace: timedelta) -> Entry:
        self._options["grace"] = grace
        return self

    def when(self, predicate: Condition) -> Entry:
        """Run a tick only if `predicate` (given the tick's time, or nothing) is true."""
        self._conditions.append((True, predicate))
        return self

    def skip(self, predicate: Condition) -> Entry:
        """Skip a tick when `predicate` is true. Conditions add up; none replaces another."""
        self._conditions.append((False, predicate))
        return self

    def on_queue(self, queue: str) -> Entry:
        self._options["queue"] = queue
        return self

    def on_connection(self, connection: str) -> Entry:
        self._options["connection"] = connection
        return self

    def delay(self, delay: timedelta) -> Entry:
        self._options["delay"] = delay
        return self

    def unique(self, unique_id: str = "") -> Entry:
        """Drop the run while a job of this name and `unique_id` still waits."""
        self._options["unique"] = unique_id
        return self

    # -- finishing ---------------------------------------------------------------

    @property
    def name(self) -> str:
        if self._name is not None:
            return self._name
        return type(self._job).name if self._job is not None else "?"

    def build(self) -> tuple[ScheduledJob | None, list[str]]:
        """The checked entry, or None and what is wrong with it."""
        problems = list(self.errors)
        timing: Timing | None = None
        try:
            if self._interval is not None:
                timing = Every(self._interval)
            else:
                zone_named(self._zone)
                timing = Cron(self._cron or " ".join(self._fields), self._zone)
        except ScheduleError as exc:
            problems.append(str(exc))
        if not self.name.strip():
            problems.append("a schedule's name cannot be empty")
        if problems or self._job is None or timing is None:
            return None, problems
        built = ScheduledJob(
            name=self.name,
            job=self._job,
            timing=timing,
            conditions=tuple(self._conditions),
            **self._options,  # type: ignore[arg-type]
        )
        return built, []

    def _clock(self, text: str) -> tuple[str, str]:
        hour, sep, minute = str(text).partition(":")
        if sep and hour.isdigit() and minute.isdigit() and int(hour) < 24 and int(minute) < 60:
            return str(int(hour)), str(int(minute))
        # Deliberately stricter than the upstream, which read "99:99" as 23:59
        # and "nope" as midnight: a typo must not become a different schedule.
        self.errors.append(f"`{text}` is not a time of day; write HH:MM, such as 07:30")
        return "0", "0"

    def _day(self, day: int | str) -> str:
        if isinstance(day, int) and 0 <= day <= 7:
            return str(day)
        found = _DAYS.get(str(day).lower()[:3])
        if found is None:
            self.errors.append(f"`{day}` is not a day of the week (0-7 or sun..sat)")
            return "*"
        return str(found)


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


__all__ = [
    "CATCH_UP_CHOICES",
    "OVERLAP_CHOICES",
    "CatchUp",
    "Condition",
    "Entry",
    "Overlap",
    "Schedule",
    "ScheduleProblems",
    "ScheduledJob",
]

# SPDX-License-Identifier: MIT
"""`Entry`: one schedule entry being written, with the upstream's builders.

A schedule is written at import time, where an exception would take the
whole application down over one typo, and a typo found one at a time costs
a deploy each. So nothing here raises: every method records what is wrong
in `errors`, and `Schedule.check()` reports all of it together. The time of
day is read strictly, unlike the upstream, which took `"99:99"` for 23:59.
"""

from __future__ import annotations

from datetime import timedelta

from ..job import Job
from .entries import (
    CATCH_UP_CHOICES,
    DEFAULT_CATCH_UP_LIMIT,
    DEFAULT_OVERLAP_FOR,
    OVERLAP_CHOICES,
    Condition,
    ScheduledJob,
)
from .timing import Cron, Every, ScheduleError, Timing, zone_named

_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}


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
        self._zone_given = False
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
        """Read the timing in an IANA zone (`Europe/Paris`); daylight saving applies.

        Not for an interval (`every`), which counts from the Unix epoch: a
        zone there would be ignored, so `Schedule.check()` refuses it.
        """
        self._zone, self._zone_given = zone, True
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
        # The zone and the expression are checked apart, so a bad zone does not
        # hide a bad expression until the next start-up.
        zone = self._zone
        try:
            zone_named(zone)
        except ScheduleError as exc:
            problems.append(str(exc))
            zone = "UTC"
        try:
            if self._interval is not None:
                timing = Every(self._interval)
                if self._zone_given:
                    problems.append(
                        f"an interval ({timing.expression}) has no time zone: it counts from "
                        f"the Unix epoch, so the zone `{self._zone}` would be ignored; remove "
                        "the zone, or write a cron expression to fire at local times"
                    )
            else:
                timing = Cron(self._cron or " ".join(self._fields), zone)
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


__all__ = ["Entry"]

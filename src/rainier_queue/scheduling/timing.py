# SPDX-License-Identifier: MIT
"""When a schedule fires: cron expressions in a time zone, and fixed intervals.

Every scheduler process must agree on the exact instant of each tick,
because a tick's instant is half of the key that says "this run was
already enqueued" (see `claims`). So a timing is a pure function from a
moment to the next tick and the latest tick, with no state and no reading
of the clock, and both kinds below answer in UTC.

`Cron` parses with `cronsim` (five fields, names, steps, `L`/`#` extras,
the day-of-month / day-of-week OR rule of Vixie and Debian cron) and adds
the shorthands (`@daily`, ...). It keeps the expression in its IANA zone,
so daylight saving time is handled the way Debian cron handles it:

- an expression for a fixed local time (minute and hour both given, such as
  `30 2 * * *`) that falls in the spring-forward gap runs once, at the
  first minute after the gap (03:00 when clocks jump from 02:00 to 03:00);
- the same kind of expression on the fall-back day runs once, on the first
  of the two 01:30s;
- an expression with a wildcard minute or hour (`*/15 * * * *`) follows
  elapsed time: every real quarter hour fires, the repeated hour included.

`Every` is a fixed interval counted from the Unix epoch, so every process
computes the same ticks without talking to the others (every 30 seconds is
:00 and :30 of each minute) and time zones do not apply to it. It is how
sub-minute schedules are written; cron's smallest unit is a minute.
"""

from __future__ import annotations

import abc
import difflib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..errors import ConfigurationError

SHORTHANDS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""Each shorthand the upstream accepts, and the five fields it stands for."""

_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 or SUN-SAT, 0 and 7 both Sunday"),
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


class ScheduleError(ConfigurationError):
    """A schedule that cannot work: a bad expression, zone, interval or option."""


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name` (`Europe/Paris`), or a `ScheduleError` saying it is unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    from zoneinfo import available_timezones  # here: reading the zone list is slow

    close = difflib.get_close_matches(str(name), sorted(available_timezones()), n=1)
    hint = f"did you mean `{close[0]}`? Use" if close else "use"
    raise ScheduleError(
        f"unknown time zone `{name}`; {hint} an IANA name such as `UTC` or `Europe/Paris`"
    )


class Timing(abc.ABC):
    """When a schedule's ticks fall. Pure: the same moment always gives the same ticks."""

    @abc.abstractmethod
    def next_after(self, moment: datetime) -> datetime | None:
        """The first tick strictly after `moment`, in UTC; None if there is none."""

    @abc.abstractmethod
    def latest_at_or_before(self, moment: datetime) -> datetime | None:
        """The last tick at or before `moment`, in UTC; None if there is none."""

    @property
    @abc.abstractmethod
    def expression(self) -> str:
        """How the timing was written, for tables and logs."""

    @property
    @abc.abstractmethod
    def zone(self) -> str:
        """The zone it is read in (`UTC` for intervals)."""

    def upcoming(self, moment: datetime, count: int) -> list[datetime]:
        """The next `count` ticks after `moment` (fewer if the schedule ends)."""
        ticks: list[datetime] = []
        current: datetime | None = moment
        while len(ticks) < count and current is not None:
            current = self.next_after(current)
            if current is not None:
                ticks.append(current)
        return ticks

    def latest(self, moment: datetime, count: int, *, after: datetime | None) -> list[datetime]:
        """Up to `count` ticks in (`after`, `moment`], oldest first, the newest kept.

        Walks backwards from `moment`, so a schedule that was down for a year
        costs `count` steps, not a year of them.
        """
        ticks: list[datetime] = []
        current = self.latest_at_or_before(moment)
        while current is not None and len(ticks) < count and (after is None or current > after):
            ticks.append(current)
            current = self.latest_at_or_before(current - _US)
        ticks.reverse()
        return ticks

    def period_near(self, moment: datetime) -> timedelta:
        """The gap between the two ticks after `moment`: how often it fires around then."""
        ticks = self.upcoming(moment, 2)
        if len(ticks) < 2:
            return timedelta(days=366)
        return ticks[1] - ticks[0]


@dataclass(frozen=True, slots=True, init=False)
class Cron(Timing):
    """A five-field cron expression (or a shorthand), read in an IANA time zone."""

    source: str
    fields: str
    zone_name: str

    def __init__(self, expression: str, zone: str = "UTC") -> None:
        source = " ".join(str(expression).split())
        fields = SHORTHANDS.get(source.lower(), source)
        if source.startswith("@") and fields == source:
            known = ", ".join(sorted(SHORTHANDS))
            raise ScheduleError(f"`{source}`: unknown shorthand; the shorthands are {known}")
        parts = fields.split()
        if len(parts) != 5:
            raise ScheduleError(
                f"`{source}`: a cron expression has 5 fields (minute hour day-of-month month "
                f"day-of-week), this has {len(parts)} field(s)"
                + ("; for seconds, use an interval (`every`)" if len(parts) == 6 else "")
            )
        zone_named(zone)
        try:
            CronSim(fields, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise ScheduleError(_explain(source, parts, exc)) from None
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "zone_name", zone)

    @property
    def expression(self) -> str:
        return self.source

    @property
    def zone(self) -> str:
        return self.zone_name

    def _local(self, moment: datetime) -> datetime:
        return moment.astimezone(ZoneInfo(self.zone_name))

    def next_after(self, moment: datetime) -> datetime | None:
        try:
            return next(CronSim(self.fields, self._local(moment))).astimezone(UTC)
        except StopIteration:
            return None

    def latest_at_or_before(self, moment: datetime) -> datetime | None:
        # cronsim's reverse walk starts one second before a whole-second start,
        # so start at the next whole second to include a tick at `moment`.
        start = self._local(moment).replace(microsecond=0) + timedelta(seconds=1)
        try:
            return next(CronSim(self.fields, start, reverse=True)).astimezone(UTC)
        except StopIteration:
            return None

    def __repr__(self) -> str:
        return f"Cron({self.source!r}, zone={self.zone_name!r})"


@dataclass(frozen=True, slots=True)
class Every(Timing):
    """A fixed interval, counted from the Unix epoch so every process agrees on the ticks."""

    interval: timedelta

    def __post_init__(self) -> None:
        if self.interval < timedelta(milliseconds=10):
            raise ScheduleError(
                f"an interval must be at least 10ms, got {self.interval.total_seconds():g}s"
            )

    @property
    def _step(self) -> int:
        return self.interval // _US

    def _index(self, moment: datetime) -> int:
        return ((moment - _EPOCH) // _US) // self._step

    def next_after(self, moment: datetime) -> datetime:
        return _EPOCH + (self._index(moment) + 1) * self._step * _US

    def latest_at_or_before(self, moment: datetime) -> datetime:
        return _EPOCH + self._index(moment) * self._step * _US

    @property
    def expression(self) -> str:
        return f"every {_short(self.interval)}"

    @property
    def zone(self) -> str:
        return "UTC"


def _short(interval: timedelta) -> str:
    seconds = interval.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


def _explain(source: str, parts: list[str], exc: CronSimError) -> str:
    said = str(exc)
    for index, (name, allowed) in enumerate(_FIELDS):
        if said.endswith(name):
            if name == "day-of-month" and parts[index].replace(",", "").isdigit():
                return (
                    f"`{source}`: day {parts[index]} never occurs in the months given "
                    f"(`{parts[3]}`), so this would never run"
                )
            return (
                f"`{source}`: the {name} field `{parts[index]}` is not valid "
                f"(allowed: {allowed}; `*`, lists `a,b`, ranges `a-b` and steps `/n`)"
            )
    return f"`{source}`: {said}"


__all__ = ["SHORTHANDS", "Cron", "Every", "ScheduleError", "Timing", "zone_named"]

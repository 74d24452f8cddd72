# SPDX-License-Identifier: MIT
"""Daylight saving time: what a schedule in an IANA zone does on the two awkward days.

The rules (see docs/scheduling.md), pinned here for America/New_York, where
2026-03-08 02:00 jumps to 03:00 and 2026-11-01 02:00 falls back to 01:00:

- a fixed local time inside the gap runs once, at the end of the gap;
- a fixed local time inside the repeated hour runs once, the first time;
- a wildcard minute or hour follows elapsed time, repeated hour included.
"""

from __future__ import annotations

from datetime import timedelta

from rainier_queue.scheduling import Cron

from .clock import at

NY = "America/New_York"


def ticks_between(cron: Cron, start: str, end: str) -> list[str]:
    found = []
    moment = at(start, NY)
    stop = at(end, NY)
    while (tick := cron.next_after(moment)) is not None and tick <= stop:
        found.append(tick.isoformat())
        moment = tick
    return found


def test_a_job_at_0230_runs_once_at_0300_on_the_spring_forward_day() -> None:
    cron = Cron("30 2 * * *", NY)
    assert ticks_between(cron, "2026-03-07 12:00", "2026-03-09 12:00") == [
        "2026-03-08T07:00:00+00:00",  # 03:00 EDT, the first minute after the gap
        "2026-03-09T06:30:00+00:00",  # 02:30 EDT the next day, as usual
    ]


def test_a_job_at_0130_runs_once_not_twice_on_the_fall_back_day() -> None:
    cron = Cron("30 1 * * *", NY)
    assert ticks_between(cron, "2026-10-31 12:00", "2026-11-02 12:00") == [
        "2026-11-01T05:30:00+00:00",  # 01:30 EDT, the first of the two
        "2026-11-02T06:30:00+00:00",  # 01:30 EST
    ]


def test_a_wildcard_hour_follows_elapsed_time_through_the_repeated_hour() -> None:
    cron = Cron("0 * * * *", NY)
    ticks = ticks_between(cron, "2026-11-01 00:30", "2026-11-01 02:30")
    # 01:00 EDT, 01:00 EST and 02:00 EST: three real hours, three runs.
    assert ticks == [
        "2026-11-01T05:00:00+00:00",
        "2026-11-01T06:00:00+00:00",
        "2026-11-01T07:00:00+00:00",
    ]


def test_a_wildcard_hour_has_no_run_in_the_hour_that_does_not_exist() -> None:
    cron = Cron("0 * * * *", NY)
    ticks = ticks_between(cron, "2026-03-08 00:30", "2026-03-08 04:30")
    assert ticks == [
        "2026-03-08T06:00:00+00:00",  # 01:00 EST
        "2026-03-08T07:00:00+00:00",  # 03:00 EDT
        "2026-03-08T08:00:00+00:00",  # 04:00 EDT
    ]


def test_the_latest_tick_agrees_with_the_next_one_across_the_gap() -> None:
    cron = Cron("30 2 * * *", NY)
    moment = at("2026-03-07 12:00", NY)
    for _ in range(48 * 4):
        moment += timedelta(minutes=15)
        latest = cron.latest_at_or_before(moment)
        assert latest is not None
        assert latest <= moment
        assert cron.next_after(latest) == cron.next_after(moment)


def test_a_schedule_in_london_is_read_in_london_time() -> None:
    # 07:30 in London is 06:30 UTC in summer and 07:30 UTC in winter.
    cron = Cron("30 7 * * *", "Europe/London")
    assert cron.next_after(at("2026-07-01 00:00")) == at("2026-07-01 06:30")
    assert cron.next_after(at("2026-12-01 00:00")) == at("2026-12-01 07:30")

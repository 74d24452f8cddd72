# SPDX-License-Identifier: MIT
"""The upstream's cron checklist, pinned on `Cron` (cronsim underneath)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rainier_queue.scheduling import Cron, Every, ScheduleError

from .clock import at


def fires_at(expression: str, moment: str) -> bool:
    """Whether `expression` has a tick at exactly `moment` (UTC)."""
    when = at(moment)
    return Cron(expression).latest_at_or_before(when) == when


def test_every_minute_matches_any_minute() -> None:
    assert fires_at("* * * * *", "2026-05-17 13:42")
    assert fires_at("* * * * *", "2026-12-31 23:59")


def test_a_fixed_time_matches_only_that_minute() -> None:
    assert fires_at("30 7 * * *", "2026-05-17 07:30")
    assert not fires_at("30 7 * * *", "2026-05-17 07:31")
    assert not fires_at("30 7 * * *", "2026-05-17 08:30")


def test_steps_ranges_and_lists_expand_as_cron_does() -> None:
    assert [fires_at("*/15 * * * *", f"2026-05-17 10:{m:02}") for m in (0, 15, 20, 45)] == [
        True,
        True,
        False,
        True,
    ]
    assert [fires_at("5/20 * * * *", f"2026-05-17 10:{m:02}") for m in (5, 25, 45, 0)] == [
        True,
        True,
        True,
        False,
    ]
    assert fires_at("0 9-17 * * *", "2026-05-17 17:00")
    assert not fires_at("0 9-17 * * *", "2026-05-17 18:00")
    assert fires_at("0 8,20 * * *", "2026-05-17 20:00")


def test_month_and_day_names_are_read_in_any_case() -> None:
    assert fires_at("0 0 * jan Mon", "2026-01-05 00:00")  # a Monday in January
    assert not fires_at("0 0 * JAN MON", "2026-02-02 00:00")


def test_seven_is_sunday_as_well_as_zero() -> None:
    assert fires_at("0 0 * * 7", "2026-05-17 00:00")  # a Sunday
    assert fires_at("0 0 * * 0", "2026-05-17 00:00")


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # The 13th, or any Friday: 2026-02-13 is a Friday, 2026-03-13 too; 2026-05-13 a Wednesday.
    assert fires_at("0 0 13 * 5", "2026-05-13 00:00")
    assert fires_at("0 0 13 * 5", "2026-05-15 00:00")  # a Friday, not the 13th


def test_an_unrestricted_day_field_is_neutral() -> None:
    assert fires_at("0 0 * * 5", "2026-05-15 00:00")
    assert not fires_at("0 0 * * 5", "2026-05-13 00:00")
    assert fires_at("0 0 13 * *", "2026-05-13 00:00")
    assert not fires_at("0 0 13 * *", "2026-05-15 00:00")


@pytest.mark.parametrize(
    ("shorthand", "moment"),
    [
        ("@yearly", "2027-01-01 00:00"),
        ("@annually", "2027-01-01 00:00"),
        ("@monthly", "2026-06-01 00:00"),
        ("@weekly", "2026-05-24 00:00"),
        ("@daily", "2026-05-18 00:00"),
        ("@midnight", "2026-05-18 00:00"),
        ("@HOURLY", "2026-05-17 14:00"),
    ],
)
def test_each_shorthand_stands_for_its_five_fields(shorthand: str, moment: str) -> None:
    assert Cron(shorthand).next_after(at("2026-05-17 13:42")) == at(moment)


def test_the_expression_keeps_the_shorthand_it_was_written_with() -> None:
    assert Cron("@daily").expression == "@daily"
    assert Cron("  */5   * * * *").expression == "*/5 * * * *"


def test_a_wrong_field_count_says_how_many_it_found() -> None:
    with pytest.raises(ScheduleError, match=r"5 fields.*3 field\(s\)"):
        Cron("* * *")


def test_an_out_of_range_value_names_the_allowed_range() -> None:
    with pytest.raises(ScheduleError, match="minute field `60`.*0-59"):
        Cron("60 * * * *")


@pytest.mark.parametrize("nonsense", ["* * * * nope", "*/0 * * * *", "5-1 * * * *", "", "* * * *"])
def test_nonsense_is_refused(nonsense: str) -> None:
    with pytest.raises(ScheduleError):
        Cron(nonsense)


def test_next_after_skips_the_current_minute() -> None:
    assert Cron("* * * * *").next_after(at("2026-05-17 10:00")) == at("2026-05-17 10:01")
    assert Cron("0 * * * *").next_after(at("2026-05-17 10:00")) == at("2026-05-17 11:00")


def test_a_date_that_never_exists_is_refused_up_front() -> None:
    # Upstream searched four years for February 30th and gave up; this says so at start-up.
    with pytest.raises(ScheduleError, match="never occurs"):
        Cron("0 0 30 2 *")


def test_six_fields_point_to_intervals_for_seconds() -> None:
    with pytest.raises(ScheduleError, match="use an interval"):
        Cron("*/10 * * * * *")


def test_an_unknown_zone_is_refused() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone `Mars/Olympus`"):
        Cron("@daily", "Mars/Olympus")


def test_intervals_count_from_the_epoch_so_every_process_agrees() -> None:
    every = Every(timedelta(seconds=30))
    assert every.next_after(at("2026-05-17 10:00:10")) == at("2026-05-17 10:00:30")
    assert every.latest_at_or_before(at("2026-05-17 10:00:30")) == at("2026-05-17 10:00:30")
    assert Every(timedelta(milliseconds=250)).next_after(at("2026-05-17 10:00:00.1")) == at(
        "2026-05-17 10:00:00.25"
    )


def test_latest_walks_back_to_the_cursor_and_no_further() -> None:
    ticks = Cron("0 * * * *").latest(at("2026-05-17 10:30"), 10, after=at("2026-05-17 07:00"))
    assert ticks == [at(f"2026-05-17 {h:02}:00") for h in (8, 9, 10)]
    assert Cron("0 * * * *").latest(at("2026-05-17 10:30"), 2, after=None) == [
        at("2026-05-17 09:00"),
        at("2026-05-17 10:00"),
    ]

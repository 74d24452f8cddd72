# SPDX-License-Identifier: MIT
"""Declaring schedules in code and in the config file, and start-up checks that list every
problem at once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rainier_queue import QueueConfig, job
from rainier_queue.errors import ConfigurationError
from rainier_queue.scheduling import (
    Cron,
    Every,
    Schedule,
    ScheduleProblems,
    schedule_from_config,
)

from .jobs import Purge, Report, registry


def expression_of(schedule: Schedule) -> str:
    (entry,) = schedule.check()
    return entry.timing.expression


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda e: e, "* * * * *"),  # the default: every minute
        (lambda e: e.every_five_minutes(), "*/5 * * * *"),
        (lambda e: e.every_minutes(20), "*/20 * * * *"),
        (lambda e: e.hourly(), "0 * * * *"),
        (lambda e: e.hourly_at(17), "17 * * * *"),
        (lambda e: e.daily(), "0 0 * * *"),
        (lambda e: e.daily_at("07:30"), "30 7 * * *"),
        (lambda e: e.twice_daily(1, 13), "0 1,13 * * *"),
        (lambda e: e.weekly(), "0 0 * * 0"),
        (lambda e: e.weekly_on("mon", "08:00"), "0 8 * * 1"),
        (lambda e: e.monthly(), "0 0 1 * *"),
        (lambda e: e.monthly_on(15, "12:05"), "5 12 15 * *"),
        (lambda e: e.yearly(), "0 0 1 1 *"),
        (lambda e: e.daily_at("09:00").weekdays(), "0 9 * * 1,2,3,4,5"),
        (lambda e: e.daily_at("10:00").weekends(), "0 10 * * 0,6"),
        (lambda e: e.cron("@hourly"), "@hourly"),
        (lambda e: e.every(seconds=30), "every 30s"),
        (lambda e: e.every(timedelta(milliseconds=500)), "every 500ms"),
    ],
)
def test_each_builder_writes_the_expression_it_names(build, expected) -> None:  # type: ignore[no-untyped-def]
    schedule = Schedule()
    build(schedule.job(Report()))
    assert expression_of(schedule) == expected


def test_a_time_of_day_that_is_not_one_is_refused_not_clamped() -> None:
    # Upstream read "99:99" as 23:59 and "nope" as midnight: a typo became another schedule.
    schedule = Schedule()
    schedule.job(Report()).daily_at("99:99")
    schedule.job(Purge()).daily_at("nope")
    problems = schedule.problems()
    assert problems == [
        "schedule `report`: `99:99` is not a time of day; write HH:MM, such as 07:30",
        "schedule `purge`: `nope` is not a time of day; write HH:MM, such as 07:30",
    ]


def test_every_problem_is_listed_at_once_each_naming_its_schedule() -> None:
    schedule = Schedule()
    schedule.job(Report()).cron("61 * * * *")
    schedule.job(Report()).named("report")  # a duplicate name
    schedule.job(Purge()).daily().in_zone("Nowhere/Special")
    schedule.job(Purge()).named("purge-b").catch_up("sometimes")
    with pytest.raises(ScheduleProblems) as raised:
        schedule.check()
    problems = raised.value.problems
    assert len(problems) == 4
    assert problems[0].startswith("schedule `report`: `61 * * * *`: the minute field")
    assert problems[1].startswith("schedule `purge`: unknown time zone `Nowhere/Special`")
    assert problems[2].startswith("schedule `purge-b`: catch_up must be one of latest, all, skip")
    assert problems[3].startswith("schedule `report` is declared 2 times")
    assert "4 problem(s)" in str(raised.value)


def test_a_job_no_worker_knows_is_a_start_up_problem() -> None:
    @job(name="unregistered")
    async def unregistered() -> None: ...

    schedule = Schedule()
    schedule.job(unregistered).hourly()
    assert schedule.problems(registry()) == [
        "schedule `unregistered`: job `unregistered` is not registered, so no worker could run it"
    ]


def test_a_job_function_can_be_scheduled_with_a_decorator() -> None:
    schedule = Schedule()

    @schedule.cron("0 6 * * *", zone="Europe/Paris", description="morning sweep", overlap="skip")
    @job(name="sweep")
    async def sweep(days: int = 7) -> None: ...

    @schedule.every(timedelta(seconds=10), name="tick")
    @job(name="heartbeat")
    async def heartbeat() -> None: ...

    first, second = schedule.check()
    assert (first.name, first.description, first.overlap) == ("sweep", "morning sweep", "skip")
    assert first.timing == Cron("0 6 * * *", "Europe/Paris")
    assert first.job.to_payload() == {"days": 7}
    assert (second.name, second.timing) == ("tick", Every(timedelta(seconds=10)))


def test_a_job_that_needs_arguments_cannot_be_built_by_a_decorator() -> None:
    schedule = Schedule()

    @schedule.cron("@daily")
    @job(name="greet")
    async def greet(who: str) -> None: ...

    (problem,) = schedule.problems()
    assert "cannot build the job" in problem
    assert "who" in problem


CONFIG = {
    "nightly": {
        "job": "report",
        "payload": {"team": "sales"},
        "cron": "30 7 * * 1-5",
        "zone": "Europe/Paris",
        "catch_up": "all",
        "catch_up_limit": 5,
        "overlap": "skip",
        "queue": "reports-eu",
        "description": "the sales report",
    },
    "heartbeat": {"job": "purge", "every": "30s", "delay": "5s", "grace": "10s"},
}


def test_config_schedules_are_read_with_every_option() -> None:
    schedule, problems = schedule_from_config(CONFIG, registry())
    assert problems == []
    nightly, heartbeat = schedule.check(registry())
    assert nightly.timing == Cron("30 7 * * 1-5", "Europe/Paris")
    assert (nightly.catch_up, nightly.catch_up_limit, nightly.overlap) == ("all", 5, "skip")
    assert (nightly.queue, nightly.description) == ("reports-eu", "the sales report")
    assert nightly.job == Report(team="sales")
    assert heartbeat.timing == Every(timedelta(seconds=30))
    assert (heartbeat.delay, heartbeat.grace) == (timedelta(seconds=5), timedelta(seconds=10))


def test_config_problems_are_all_listed_with_a_did_you_mean() -> None:
    tables = {
        "a": {"job": "report", "cron": "@daily", "zoen": "UTC"},
        "b": {"job": "nope", "cron": "@daily"},
        "c": {"job": "report", "payload": {"team": 3}, "cron": "@daily"},
        "d": {"job": "report", "cron": "* * *"},
        "e": {"job": "report", "cron": "@daily", "every": "1m"},
        "f": {"job": "report", "cron": "@daily", "overlap": "never"},
    }
    schedule, problems = schedule_from_config(tables, registry(), source="pyproject.toml")
    problems += schedule.problems(registry())
    assert len(problems) == 6
    assert problems[0] == "schedule `a` (pyproject.toml): unknown key `zoen`; did you mean `zone`?"
    assert problems[1].startswith("schedule `b` (pyproject.toml): job `nope` is not registered")
    assert problems[2].startswith("schedule `c` (pyproject.toml): payload:")
    assert problems[3].startswith(
        "schedule `d` (pyproject.toml): `* * *`: a cron expression has 5 fields"
    )
    assert problems[4].startswith("schedule `e` (pyproject.toml): give exactly one of")
    assert problems[5].startswith("schedule `f` (pyproject.toml): `overlap` must be one of")


def test_code_and_config_schedules_with_one_name_are_reported() -> None:
    code = Schedule()
    code.job(Report()).hourly().named("nightly")
    config, _ = schedule_from_config(CONFIG, registry())
    code.extend(config)
    assert code.problems(registry()) == [
        "schedule `nightly` is declared 2 times; give each a name of its own with .named() "
        "(the name keys its runs in the shared store)"
    ]


def test_the_queue_config_keeps_its_schedules_table() -> None:
    config = QueueConfig.from_mapping(
        {"connections": {"main": "memory://"}, "schedules": CONFIG}, source="test"
    )
    assert config.schedules == CONFIG
    with pytest.raises(ConfigurationError, match="must be a table of schedules"):
        QueueConfig.from_mapping({"connections": {"main": "memory://"}, "schedules": "x"})

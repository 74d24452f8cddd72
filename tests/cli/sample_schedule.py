# SPDX-License-Identifier: MIT
"""Schedules for the CLI tests: `--schedule tests.cli.sample_schedule:schedule`."""

from __future__ import annotations

from datetime import timedelta

from rainier_queue.scheduling import Schedule

from .sample_jobs import Note

schedule = Schedule()
schedule.job(Note(text="tick")).every(timedelta(milliseconds=200)).named("fast").describe(
    "a note five times a second"
)
schedule.job(Note(text="new year")).yearly().in_zone("Pacific/Auckland").named("new-year")

broken = Schedule()
broken.job(Note(text="x")).cron("* * *").named("three-fields")
broken.job(Note(text="y")).daily_at("25:00").named("late")

heartbeat = Schedule()
heartbeat.job(Note(text="beat")).every(timedelta(seconds=10)).named("heartbeat")

zoned_interval = Schedule()
zoned_interval.job(Note(text="z")).every(seconds=10).in_zone("Europe/Paris").named("zoned")

# SPDX-License-Identifier: MIT
"""Schedules declared in the config file, checked against the job registry.

Operations people change timetables more often than code, so a schedule
can live in `[tool.rainier-queue.schedules]` (or `rainier-queue.toml`),
one table per entry, named by its key:

```toml
[tool.rainier-queue.schedules.nightly-report]
job = "send-report"                 # a registered job's wire name
payload = { team = "ops" }          # its fields, checked like a dispatch
cron = "30 7 * * 1-5"               # or: every = "30s"
zone = "Europe/Paris"
catch_up = "latest"                 # latest | all | skip
overlap = "skip"                    # allow | skip | queue
queue = "reports"
description = "The ops report, weekday mornings"
```

Each table is read in full before anything is reported, so one start-up
lists every problem: an unknown key (with a "did you mean"), an unknown
job, a payload that does not fit the job's fields, a bad expression.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ..durations import parse_duration
from ..errors import QueueError
from ..registry import JobRegistry
from .builder import Entry
from .entries import CATCH_UP_CHOICES, OVERLAP_CHOICES
from .schedule import Schedule

KEYS = frozenset(
    {
        "job",
        "payload",
        "cron",
        "every",
        "zone",
        "description",
        "catch_up",
        "catch_up_limit",
        "overlap",
        "overlap_for",
        "grace",
        "queue",
        "connection",
        "delay",
        "unique",
    }
)


def schedule_from_config(
    tables: Mapping[str, Any], registry: JobRegistry, *, source: str = "config"
) -> tuple[Schedule, list[str]]:
    """A `Schedule` of the config's entries, and the problems found reading them.

    The entries that could be read are in the schedule even when others
    could not, so `problems` can be reported together with the code
    schedule's own (see `Schedule.problems`).
    """
    schedule = Schedule()
    problems: list[str] = []
    for name, table in tables.items():
        where = f"schedule `{name}` ({source})"
        if not isinstance(table, Mapping):
            problems.append(f"{where}: must be a table with `job` and `cron` or `every`")
            continue
        wrong = _read(schedule, str(name), table, registry)
        problems.extend(f"{where}: {p}" for p in wrong)
    return schedule, problems


def _read(
    schedule: Schedule, name: str, table: Mapping[str, Any], registry: JobRegistry
) -> list[str]:
    problems: list[str] = []
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), sorted(KEYS), n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            problems.append(f"unknown key `{key}`{hint}")
    job_name = table.get("job")
    if not isinstance(job_name, str) or not job_name:
        return [*problems, "needs `job`, a registered job's wire name"]
    if not registry.knows(job_name):
        known = ", ".join(registry.names()) or "none are registered"
        return [*problems, f"job `{job_name}` is not registered (registered: {known})"]
    payload = table.get("payload", {})
    try:
        job = registry.get(job_name).from_payload(payload)
    except QueueError as exc:
        return [*problems, f"payload: {exc}"]
    has_cron, has_every = "cron" in table, "every" in table
    if has_cron == has_every:
        return [*problems, "give exactly one of `cron` and `every`"]
    entry = schedule.job(job).named(name)
    try:
        _apply(entry, table)
    except (QueueError, TypeError, ValueError) as exc:
        problems.append(str(exc))
    return problems


def _apply(entry: Entry, table: Mapping[str, Any]) -> None:
    if "cron" in table:
        entry.cron(_text(table, "cron"))
    else:
        entry.every(parse_duration(table["every"], setting="every"))
    if "zone" in table:
        entry.in_zone(_text(table, "zone"))
    if "description" in table:
        entry.describe(_text(table, "description"))
    if "catch_up" in table or "catch_up_limit" in table:
        limit = table.get("catch_up_limit", 100)
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise ValueError("`catch_up_limit` must be a whole number")
        entry.catch_up(_choice(table, "catch_up", CATCH_UP_CHOICES, "latest"), limit=limit)
    if "overlap" in table or "overlap_for" in table:
        hold = parse_duration(table.get("overlap_for", "6h"), setting="overlap_for")
        entry.overlap(_choice(table, "overlap", OVERLAP_CHOICES, "allow"), hold_for=hold)
    if "grace" in table:
        entry.grace(parse_duration(table["grace"], setting="grace"))
    if "queue" in table:
        entry.on_queue(_text(table, "queue"))
    if "connection" in table:
        entry.on_connection(_text(table, "connection"))
    if "delay" in table:
        entry.delay(parse_duration(table["delay"], setting="delay"))
    if "unique" in table:
        entry.unique(_text(table, "unique"))


def _text(table: Mapping[str, Any], key: str) -> str:
    value = table[key]
    if not isinstance(value, str):
        raise ValueError(f"`{key}` must be a string, not {value!r}")
    return value


def _choice(table: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise ValueError(f"`{key}` must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


__all__ = ["KEYS", "schedule_from_config"]

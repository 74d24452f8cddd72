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
(or one `rainier-queue doctor`) lists every problem of every table: an
unknown key or job (each with a "did you mean"), a payload that does not fit
the job's fields, a bad expression, an unknown zone, a zone given to an
interval. A typo in the job's name does not hide a typo in its zone.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..durations import parse_duration
from ..errors import QueueError
from ..job import Job
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
    """Every problem of one table; the entry joins `schedule` only when there is none."""
    problems: list[str] = []
    for key in table:
        if key not in KEYS:
            problems.append(f"unknown key `{key}`{_did_you_mean(str(key), KEYS)}")
    job: Job | None = None
    job_name = table.get("job")
    if not isinstance(job_name, str) or not job_name:
        problems.append("needs `job`, a registered job's wire name")
    elif not registry.knows(job_name):
        known = ", ".join(registry.names()) or "none are registered"
        hint = _did_you_mean(job_name, registry.names())
        problems.append(f"job `{job_name}` is not registered{hint} (registered: {known})")
    else:
        try:
            job = registry.get(job_name).from_payload(table.get("payload", {}))
        except QueueError as exc:
            problems.append(f"payload: {exc}")
    if ("cron" in table) == ("every" in table):
        problems.append("give exactly one of `cron` and `every`")
    entry = Entry(job, f"schedule `{name}`").named(name)
    problems.extend(_apply(entry, table))
    built, wrong = entry.build()
    problems.extend(wrong)
    if built is not None and not problems:
        schedule.add(built)
    return problems


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


def _apply(entry: Entry, table: Mapping[str, Any]) -> list[str]:
    """Hand each key to the builder; the problems of every key, not only the first."""
    problems: list[str] = []

    def attempt(action: Callable[[], object]) -> None:
        try:
            action()
        except (QueueError, TypeError, ValueError) as exc:
            problems.append(str(exc))

    if "cron" in table:
        attempt(lambda: entry.cron(_text(table, "cron")))
    elif "every" in table:
        attempt(lambda: entry.every(parse_duration(table["every"], setting="every")))
    if "zone" in table:
        attempt(lambda: entry.in_zone(_text(table, "zone")))
    if "description" in table:
        attempt(lambda: entry.describe(_text(table, "description")))
    if "catch_up" in table or "catch_up_limit" in table:
        attempt(lambda: _catch_up(entry, table))
    if "overlap" in table or "overlap_for" in table:
        attempt(lambda: _overlap(entry, table))
    if "grace" in table:
        attempt(lambda: entry.grace(parse_duration(table["grace"], setting="grace")))
    if "queue" in table:
        attempt(lambda: entry.on_queue(_text(table, "queue")))
    if "connection" in table:
        attempt(lambda: entry.on_connection(_text(table, "connection")))
    if "delay" in table:
        attempt(lambda: entry.delay(parse_duration(table["delay"], setting="delay")))
    if "unique" in table:
        attempt(lambda: entry.unique(_text(table, "unique")))
    return problems


def _catch_up(entry: Entry, table: Mapping[str, Any]) -> None:
    limit = table.get("catch_up_limit", 100)
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise ValueError("`catch_up_limit` must be a whole number")
    entry.catch_up(_choice(table, "catch_up", CATCH_UP_CHOICES, "latest"), limit=limit)


def _overlap(entry: Entry, table: Mapping[str, Any]) -> None:
    hold = parse_duration(table.get("overlap_for", "6h"), setting="overlap_for")
    entry.overlap(_choice(table, "overlap", OVERLAP_CHOICES, "allow"), hold_for=hold)


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

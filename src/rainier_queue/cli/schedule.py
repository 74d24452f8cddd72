# SPDX-License-Identifier: MIT
"""`rainier-queue schedule`: run, loop, list and try the schedules.

Three ways to run the scheduler, for three sizes of deployment: `run` is one
pass for a system cron entry (as upstream's `schedule:run`), `work` is a
long-running loop that sleeps to the next tick, and `work --with-scheduler`
(in `cli.work`) puts the loop inside a worker so a small deployment runs one
process. Any number of each may run at once: the claims in the shared
store make sure each tick is enqueued once.

The schedules come from a `Schedule` in code, named once in the config
(`schedule = "module:attribute"`, or a function returning one) or by
`--schedule` (which wins), and from the config file's `[schedules]` tables,
checked together before anything runs: every problem is listed and the
command exits 2. A schedule in code that nothing names is never seen, so
every message about a missing schedule says where schedules come from.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import cast
from urllib.parse import parse_qsl, urlencode
from zoneinfo import ZoneInfo

import click

from ..cache.memory import MemoryCache
from ..cache.stores import open_cache
from ..envelope import format_time
from ..errors import ConfigurationError
from ..locks import Cache, LockManager
from ..scheduling import (
    Outcome,
    Overview,
    Schedule,
    Scheduler,
    UnknownSchedule,
    schedule_from_config,
)
from .exit_codes import ExitCode
from .loading import Loaded, _put_cwd_on_path
from .output import Problem, echo, note, stdout_console, table, warn
from .runtime import State, run_command
from .schedule_option import SCHEDULE_OPTION


@dataclass(frozen=True, slots=True)
class Gathered:
    """The schedules a command would run, what is wrong with them, and where they came from."""

    schedule: Schedule
    problems: list[str]
    code: str | None
    """Where the Schedule in code was named (`--schedule x`, `schedule` in FILE); None if
    nothing named one."""
    config: str
    """The config file the `[schedules]` tables were read from."""

    def sources(self) -> str:
        """Where schedules come from, for a message about a schedule that is not there."""
        tables = f"the [schedules] tables of {self.config}"
        if self.code is not None:
            return f"schedules come from {tables} and from the Schedule named by {self.code}"
        return (
            f"schedules come from {tables}; a Schedule in code is read only when it is named, "
            'with `schedule = "module:attribute"` in the config or --schedule, and none is'
        )


async def gather_schedules(loaded: Loaded, spec: str | None) -> Gathered:
    """Every schedule, code and config, with every problem found in them, raising nothing."""
    code: str | None = spec
    origin, where = "--schedule", f"--schedule {spec}"
    if spec is None:
        code = loaded.schedule
        origin = f"`schedule` in {loaded.schedules_source}"
        where = f'`schedule = "{code}"` in {loaded.schedules_source}'
    schedule, problems = Schedule(), []
    if code is not None:
        try:
            schedule = await _load_schedule(code, origin)
        except Problem as exc:
            problems.append(exc.message)
    from_config, wrong = schedule_from_config(
        loaded.schedules, loaded.registry, source=loaded.schedules_source
    )
    schedule.extend(from_config)
    problems += wrong + schedule.problems(loaded.registry)
    return Gathered(
        schedule, problems, where if code is not None else None, loaded.schedules_source
    )


async def build_scheduler(loaded: Loaded, spec: str | None, connection: str | None) -> Scheduler:
    """The scheduler for the code and config schedules, or a `Problem` listing what is wrong."""
    gathered = await gather_schedules(loaded, spec)
    if gathered.problems:
        listed = "".join(f"\n  - {problem}" for problem in gathered.problems)
        raise Problem(f"the schedule cannot run, because:{listed}")
    if not len(gathered.schedule):
        raise Problem(
            "there are no schedules: name a Schedule in code with "
            '`schedule = "module:attribute"` in the config (or --schedule), or declare '
            "[tool.rainier-queue.schedules.NAME] tables in the config"
        )
    manager = loaded.manager
    store = None
    if manager.locks is None:
        store = claim_store(loaded, connection)
        # A worker in this process (`work --with-scheduler`) then gives back overlap locks.
        manager.locks = LockManager(store)
    scheduler = Scheduler(manager, gathered.schedule, store=store)
    scheduler.sources = gathered.sources()
    return scheduler


def claim_store(loaded: Loaded, connection: str | None) -> Cache:
    """The claim store in the connection's own database or Redis, when no `locks` is set."""
    queue = loaded.queue(connection)
    if not queue.capabilities.shared_between_processes:
        return MemoryCache()  # one process owns the queue, so it owns the claims too
    url = loaded.urls.get(loaded.connection_name(connection))
    if url is None:
        raise Problem(
            "the scheduler keeps its per-tick claims in a shared store, and none is configured "
            f"for {queue.describe()}: give the QueueManager `locks` (or set `locks` in the "
            "config) on the same database or Redis"
        )
    base, _, query = url.partition("?")
    kept = urlencode([(k, v) for k, v in parse_qsl(query) if k in _STORE_OPTIONS])
    try:
        return open_cache(f"{base}?{kept}" if kept else base)
    except ConfigurationError as exc:
        raise Problem(
            f"the scheduler cannot keep its claims beside {queue.describe()} ({exc}); set "
            "`locks` in the config to a database or Redis URL"
        ) from exc


_STORE_OPTIONS = frozenset({"prefix", "schema"})
"""Query options a queue URL and its cache store share; the rest are the queue's own."""


async def _load_schedule(spec: str, origin: str) -> Schedule:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise Problem(
            f"{origin} takes `module:attribute`, such as `myapp.jobs:schedule`; got `{spec}`"
        )
    _put_cwd_on_path()
    try:
        target: object = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise Problem(f"cannot load the schedule `{spec}` ({origin}): {exc}", cause=exc) from exc
    if not isinstance(target, Schedule) and callable(target):
        target = cast(Callable[[], object], target)()
        if inspect.isawaitable(target):
            target = await target
    if not isinstance(target, Schedule):
        raise Problem(f"`{spec}` ({origin}) is a {type(target).__name__}, not a Schedule")
    return target


@click.group()
def schedule() -> None:
    """Run the schedules: one pass, a loop, a table of what runs when, or one run by hand."""


@schedule.command("run")
@SCHEDULE_OPTION
@click.pass_obj
def run_once(state: State, schedule_spec: str | None) -> None:
    """Enqueue whatever is due now, once (for a system cron entry). Exit 1 if an enqueue failed."""

    async def body(loaded: Loaded) -> int:
        scheduler = await build_scheduler(loaded, schedule_spec, state.settings.connection)
        outcomes = await scheduler.run_pending()
        if not outcomes:
            echo("nothing is due")
        for made in outcomes:
            _show(made)
        return ExitCode.JOB_FAILED if any(o.status == "failed" for o in outcomes) else 0

    run_command(state, body)


@schedule.command("work")
@SCHEDULE_OPTION
@click.pass_obj
def work_loop(state: State, schedule_spec: str | None) -> None:
    """Run pass after pass, sleeping to the next tick, until SIGTERM or Ctrl-C."""

    async def body(loaded: Loaded) -> int:
        scheduler = await build_scheduler(loaded, schedule_spec, state.settings.connection)
        stop = asyncio.Event()
        stop_on_signals(stop)
        note(f"scheduling {len(scheduler.entries)} schedule(s) on {loaded.source}")
        await scheduler.run(stop)
        note("scheduler stopped")
        return ExitCode.OK

    run_command(state, body)


def stop_on_signals(stop: asyncio.Event) -> None:
    """Set `stop` on SIGTERM or SIGINT, so the loop ends between passes."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - not Unix
            continue


@schedule.command("list")
@SCHEDULE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as JSON.")
@click.pass_obj
def list_schedules(state: State, schedule_spec: str | None, as_json: bool) -> None:
    """A table: name, expression, zone, the next three runs, and the last run with its outcome."""

    async def body(loaded: Loaded) -> int:
        scheduler = await build_scheduler(loaded, schedule_spec, state.settings.connection)
        rows = await scheduler.overview()
        if as_json:
            echo(json.dumps([_as_dict(row.entry.name, row) for row in rows]))
            return 0
        shown = []
        for row in rows:
            zone = ZoneInfo(row.entry.timing.zone)
            name = row.entry.name
            if row.entry.description:
                name += f"\n{row.entry.description}"
            last = "never"
            if row.last is not None:
                last = f"{_local(row.last.tick, zone)}\n{row.last.describe()}"
            shown.append(
                (
                    name,
                    row.entry.timing.expression,
                    row.entry.timing.zone,
                    "\n".join(_local(t, zone) for t in row.upcoming) or "never",
                    last,
                )
            )
        columns = ["schedule", "when", "zone", "next runs", "last run"]
        stdout_console().print(table(columns, shown))
        echo(f"{len(rows)} schedule(s)")
        return 0

    run_command(state, body)


@schedule.command("test")
@click.argument("name")
@SCHEDULE_OPTION
@click.pass_obj
def test_one(state: State, name: str, schedule_spec: str | None) -> None:
    """Enqueue schedule NAME now, outside its timetable (overlap and uniqueness still apply)."""

    async def body(loaded: Loaded) -> int:
        scheduler = await build_scheduler(loaded, schedule_spec, state.settings.connection)
        try:
            _show(await scheduler.trigger(name))
        except UnknownSchedule as exc:
            raise Problem(str(exc)) from exc
        return 0

    run_command(state, body)


def _show(made: Outcome) -> None:
    tick = format_time(made.tick)
    if made.status == "enqueued":
        echo(f"enqueued `{made.schedule}` (tick {tick}) as job {made.job_id}")
    elif made.status == "skipped":
        echo(f"skipped `{made.schedule}` (tick {tick}): {made.reason}")
    else:
        warn(f"`{made.schedule}` (tick {tick}) failed: {made.reason}")


def _local(moment: datetime, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def _as_dict(name: str, row: Overview) -> dict[str, object]:
    last = row.last
    return {
        "name": name,
        "description": row.entry.description,
        "expression": row.entry.timing.expression,
        "zone": row.entry.timing.zone,
        "next": [format_time(t) for t in row.upcoming],
        "last": None
        if last is None
        else {
            "tick": format_time(last.tick),
            "status": last.status,
            "reason": last.reason,
            "job_id": last.job_id,
        },
    }


__all__ = [
    "SCHEDULE_OPTION",
    "Gathered",
    "build_scheduler",
    "gather_schedules",
    "schedule",
    "stop_on_signals",
]

# SPDX-License-Identifier: MIT
"""`rainier-queue doctor`: is this deployment able to run its jobs safely?

Most queue incidents are configuration that was wrong from the start and
only showed under load: a job timeout longer than the lease (jobs run
twice), unique jobs with no shared lock store (duplicates get through), a
schema nobody migrated, a job whose queue no worker serves (it waits for
ever), a topic or table nobody provisioned. Each of those can be seen
before the first job runs, so `doctor` looks, connection by connection, and
says what to change: for what a queue needs on its server, the `provision`
command that makes it.

Findings come in three grades: `ok`; `warn`, worth knowing but not wrong
in itself (a schema that will be created on first use); and `problem`,
which makes the exit code 4.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import click

from ..errors import BrokerError
from ..job import Job
from ..outbox import Outbox
from ..overview import FAILED_READ, overview, unknown_names
from ..queue import (
    Capabilities,
    Countable,
    Diagnosable,
    FailedJobListing,
    Finding,
    HealthNotes,
    Migratable,
    Provisionable,
    Queue,
)
from ..worker import WorkerOptions, check_worker_settings
from .doctor_schedules import schedule_findings
from .exit_codes import ExitCode
from .loading import Loaded
from .provision import queues_to_provision
from .runtime import State, message_for, run_command
from .schedule_option import SCHEDULE_OPTION

Reached = Literal["unreachable", "incomplete", "ready"]

_STYLE = {"ok": "green", "warn": "yellow", "problem": "red"}


@dataclass
class Report:
    """Findings in the order they were made; printed as they come."""

    problems: int = 0
    seen: set[str] = field(default_factory=set)

    def add(self, grade: str, message: str) -> None:
        if grade != "ok" and message in self.seen:
            return
        self.seen.add(message)
        if grade == "problem":
            self.problems += 1
        click.secho(f"  {grade:<8}", fg=_STYLE[grade], nl=False)
        click.echo(message)


@click.command()
@SCHEDULE_OPTION
@click.pass_obj
def doctor(state: State, schedule_spec: str | None) -> None:
    """Check every connection, the jobs, the lock store and the schedules; exit 4 if
    something is wrong."""

    async def body(loaded: Loaded) -> int:
        report = Report()
        _jobs(loaded, report)
        names = (
            [state.settings.connection]
            if state.settings.connection is not None
            else loaded.manager.connection_names()
        )
        for name in names:
            queue = loaded.queue(name)
            default = " (default)" if name == loaded.manager.default_connection else ""
            click.secho(f"connection `{name}`{default}: {queue.describe()}", bold=True)
            if await _connection(loaded, name, queue, report):
                await _system(loaded, queue, report)
                await _unknown_names(loaded, queue, report)
            outbox = loaded.manager.outbox(name)
            if outbox is not None:
                await _outbox(outbox, name, report)
        _locks(loaded, report)
        heading, findings = await schedule_findings(
            loaded, schedule_spec, state.settings.connection
        )
        click.secho(heading, bold=True)
        for grade, message in findings:
            report.add(grade, message)
        if report.problems:
            click.echo(f"{report.problems} problem(s) found")
            return ExitCode.PROBLEMS
        click.echo("no problems found")
        return ExitCode.OK

    run_command(state, body)


def _jobs(loaded: Loaded, report: Report) -> None:
    click.secho(f"application: connections from {loaded.source}", bold=True)
    if loaded.app is None:
        report.add("problem", "no --app given, so no jobs are known; name the registry with --app")
        return
    names = loaded.registry.names()
    listed = ", ".join(f"`{n}`" for n in names) if names else "none"
    report.add("ok", f"{len(names)} job(s) registered from {loaded.app.spec}: {listed}")
    served = loaded.manager.default_queues()
    for queue_name in loaded.registry.queues():
        if queue_name not in served:
            users = ", ".join(f"`{c.name}`" for c in loaded.registry if c.queue == queue_name)
            report.add(
                "warn",
                f"{users} go(es) to queue `{queue_name}`, which a worker started without --queue "
                f"does not serve (it serves {', '.join(served)}); declare `queues` in the "
                "config or start a worker with --queue",
            )


async def _connection(loaded: Loaded, name: str, queue: Queue, report: Report) -> bool:
    """Check one connection; True when it is reachable with nothing missing, so reading
    its jobs and heartbeats creates nothing (doctor only reads)."""
    reached = await _provisioning(loaded, name, queue, report)
    if reached == "unreachable":
        return False
    report.add("ok", _capabilities(queue.capabilities))
    if isinstance(queue, HealthNotes):
        try:
            for note in await queue.health_notes():
                report.add("ok", note)
        except BrokerError:
            pass  # the warnings below say the settings could not be read
    if isinstance(queue, Diagnosable):
        try:
            warnings = await queue.health_warnings()
        except BrokerError as exc:
            warnings = [f"could not read the server's settings: {message_for(exc)}"]
        for warning in warnings:
            report.add("warn", warning)
    if not queue.capabilities.shared_between_processes:
        report.add(
            "warn",
            "it lives inside one process: workers and dispatchers in other processes do not "
            "share its jobs",
        )
    table = loaded.worker_settings(name)
    which = "the connection's worker settings" if table else "the default worker settings"
    options = WorkerOptions(**{"queues": tuple(loaded.manager.default_queues()), **table})
    problems = check_worker_settings(queue, loaded.registry, options)
    for problem in problems:
        report.add("problem", f"with {which}: {problem}")
    if not problems:
        lease = f"the {queue.lease.total_seconds():g}s lease" if queue.lease else "no lease"
        report.add("ok", f"{which} fit {lease}")
    return reached == "ready"


async def _system(loaded: Loaded, queue: Queue, report: Report) -> None:
    """The connection as a whole: queues with jobs no live worker serves, and the jobs
    of workers that are gone (`overview.py`); said to be unknowable without heartbeats."""
    queues = [*loaded.manager.default_queues(), *(loaded.registry.queues() if loaded.app else ())]
    try:
        seen = await overview(queue, list(dict.fromkeys(queues)))
    except BrokerError as exc:
        report.add("warn", f"could not read its jobs and heartbeats: {message_for(exc)}")
        return
    if seen is None:
        report.add(
            "ok",
            f"the {queue.name} driver keeps no worker heartbeats, so which queues are served "
            "and which jobs dead workers hold cannot be told from here",
        )
        return
    if not seen.beats:
        # No worker ever beat here (or not within the hour): a deployment whose workers
        # are not started yet, not one that forgot a queue. Said, not warned.
        waiting = ", ".join(f"`{u.queue}` ({u.jobs})" for u in seen.unserved)
        report.add(
            "ok",
            "no worker has a heartbeat on this connection"
            + (f"; jobs wait on {waiting} until one is started" if waiting else ""),
        )
        return
    served = ", ".join(f"`{q}`" for q in seen.served) or "no queue"
    report.add("ok", f"{len(seen.live)} live worker(s), serving {served}")
    for unserved in seen.unserved:
        report.add(
            "warn",
            f"queue `{unserved.queue}` has {unserved.jobs} job(s) waiting and no live worker "
            f"serves it; start one: `rainier-queue work --queue {unserved.queue}`",
        )
    for held in seen.stranded:
        beat = held.worker
        back = (
            f"it comes back when its lease ends at {_when(held.lease_until)}"
            if held.lease_until is not None
            else "it comes back when its lease ends"
        )
        listed = "" if seen.looked_up else " (as its last heartbeat listed it)"
        report.add(
            "warn",
            f"job {held.job_id} (`{held.name}` on `{held.queue}`) is held by worker "
            f"{beat.worker_id} on host {beat.host}, gone since {_when(beat.last_beat)}"
            f"{listed}; {back}",
        )


async def _unknown_names(loaded: Loaded, queue: Queue, report: Report) -> None:
    """Failed jobs under names no job class of the app knows: a worker fails them at once."""
    if loaded.app is None:
        return  # without the app, no name is known: `_jobs` has said so
    try:
        unknown = await unknown_names(queue, set(loaded.registry.names()))
    except BrokerError as exc:
        report.add("warn", f"could not read its failed jobs: {message_for(exc)}")
        return
    for each in unknown or ():
        on = ", ".join(f"`{q}`" for q in each.queues)
        report.add(
            "warn",
            f"{each.failed} failed job(s) named `{each.name}` (on {on}, the newest at "
            f"{_when(each.newest)}) have no job class in {loaded.app.spec}, so every worker "
            "fails them at once: register the class, then `rainier-queue retry ID` them, or "
            f"drop them with `rainier-queue forget ID` (the newest {FAILED_READ} failed jobs "
            "were read)",
        )


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _provisioning(loaded: Loaded, name: str, queue: Queue, report: Report) -> Reached:
    """Whether the server answers, and what the queues need that is missing or not as asked.

    Each finding names the command that fixes it (or what a person must do);
    one the driver puts right on first use is a warning, any other a problem.
    `unreachable` when the server could not be reached, `incomplete` when
    something is missing.
    """
    if not isinstance(queue, Provisionable):
        try:
            await queue.size(loaded.manager.default_queues()[0])
        except BrokerError as exc:
            report.add("problem", f"cannot reach it: {message_for(exc)}")
            return "unreachable"
        except Exception as exc:  # a driver that cannot count (inline) is still usable
            report.add("warn", f"cannot count its jobs: {exc}")
        else:
            report.add("ok", "reachable; what a queue needs is made when it is first used")
        return "ready"
    queues = queues_to_provision(loaded, ())
    try:
        findings = await queue.check_provisioned(queues)
        version = await queue.schema_status() if isinstance(queue, Migratable) else None
    except BrokerError as exc:
        report.add("problem", f"cannot reach it: {message_for(exc)}")
        return "unreachable"
    if version is not None and not findings:
        report.add("ok", f"reachable; schema version {version[0]} (this code expects {version[1]})")
    elif not findings:
        listed = ", ".join(f"`{q}`" for q in queues)
        report.add("ok", f"reachable; what queue(s) {listed} need is in place")
    several = len(loaded.manager.connection_names()) > 1
    for finding in findings:
        report.add(
            "warn" if finding.fixed_on_first_use else "problem",
            _with_fix(finding, f" --connection {name}" if several else ""),
        )
    return "incomplete" if findings else "ready"


async def _outbox(outbox: Outbox, name: str, report: Report) -> None:
    """Whether the connection's outbox is in place, and what waits in it."""
    store = outbox.store
    try:
        findings = await store.check_provisioned([name]) if isinstance(store, Provisionable) else []
        # Counting would make missing tables (`migrate = true`): doctor only reads.
        ready = not findings
        counts = await store.counts(name) if ready and isinstance(store, Countable) else None
        failed = (
            await store.failed_jobs(queue=name, limit=100)
            if ready and isinstance(store, FailedJobListing)
            else []
        )
    except BrokerError as exc:
        report.add("problem", f"{outbox.describe()} cannot be reached: {message_for(exc)}")
        return
    for finding in findings:
        report.add(
            "warn" if finding.fixed_on_first_use else "problem",
            f"its outbox: {_with_fix(finding, f' --connection {name}')}",
        )
    if counts is not None:
        report.add(
            "ok",
            f"{outbox.describe()}: {counts.waiting} row(s) waiting for a relay, "
            f"{counts.reserved} held by relays, {counts.delayed} waiting for their queue to be "
            "provisioned; run `rainier-queue relay` (or `work --with-relay`) to move them",
        )
    if failed:
        more = "+" if len(failed) >= 100 else ""
        report.add(
            "warn",
            f"{len(failed)}{more} outbox row(s) set aside in the outbox's failed table "
            f"(tables {getattr(store, 'prefix', '')}*), the first because: {failed[0].error}",
        )


def _with_fix(finding: Finding, connection: str) -> str:
    """The finding, and the command that fixes it (or what a person must do)."""
    if not finding.provisioning_fixes:
        return f"{finding.subject} {finding.problem}: {finding.fix}"
    queue = f" --queue {shlex.quote(finding.queue)}" if finding.queue is not None else ""
    text = f"{finding.subject} {finding.problem}: run `rainier-queue{connection} provision{queue}`"
    return f"{text}; {finding.fix}" if finding.fix else text


def _capabilities(capabilities: Capabilities) -> str:
    flags = [
        f"{f.name.replace('_', ' ')}: {'yes' if getattr(capabilities, f.name) else 'no'}"
        for f in dataclasses.fields(capabilities)
    ]
    return "capabilities: " + ", ".join(flags)


def _locks(loaded: Loaded, report: Report) -> None:
    unique = [cls.name for cls in loaded.registry if cls.unique_id is not Job.unique_id]
    locks = loaded.manager.locks
    click.secho(f"locks: {locks.cache.name if locks else 'none configured'}", bold=True)
    if not unique:
        report.add("ok", "no registered job is unique, so no lock store is needed")
        return
    listed = ", ".join(f"`{n}`" for n in unique)
    if locks is None:
        report.add(
            "problem",
            f"{listed} ask(s) to be unique, but there is no lock store, so duplicates are not "
            'dropped; set `locks` in the config (for example locks = "sqlite:///jobs.db")',
        )
        return
    shared_queues = any(
        loaded.manager.connection(name).capabilities.shared_between_processes
        for name in loaded.manager.connection_names()
    )
    if not locks.is_shared and shared_queues:
        report.add(
            "problem",
            f"{listed} ask(s) to be unique, but the `{locks.cache.name}` lock store is not "
            "shared between processes: the dispatching process and the worker each see their "
            'own locks; use a shared store (locks = "sqlite:///jobs.db")',
        )
        return
    report.add("ok", f"unique jobs {listed} use a shared lock store")


__all__ = ["doctor"]

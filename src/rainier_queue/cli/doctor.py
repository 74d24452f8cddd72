# SPDX-License-Identifier: MIT
"""`rainier-queue doctor`: is this deployment able to run its jobs safely?

Most queue incidents are configuration that was wrong from the start and
only showed under load: a job timeout longer than the lease (jobs run
twice), unique jobs with no shared lock store (duplicates get through), a
schema nobody migrated, a job whose queue no worker serves (it waits for
ever). Each of those can be seen before the first job runs, so `doctor`
looks, connection by connection, and says what to change.

Findings come in three grades: `ok`; `warn`, worth knowing but not wrong
in itself (a schema that will be created on first use); and `problem`,
which makes the exit code 4.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import click

from ..errors import BrokerError
from ..job import Job
from ..queue import Capabilities, Diagnosable, HealthNotes, Migratable, Queue
from ..worker import WorkerOptions, check_worker_settings
from .doctor_schedules import schedule_findings
from .exit_codes import ExitCode
from .loading import Loaded
from .runtime import State, message_for, run_command
from .schedule_option import SCHEDULE_OPTION

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
            await _connection(loaded, name, queue, report)
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


async def _connection(loaded: Loaded, name: str, queue: Queue, report: Report) -> None:
    if isinstance(queue, Migratable):
        try:
            applied, expected = await queue.schema_status()
        except BrokerError as exc:
            report.add("problem", f"cannot reach it: {message_for(exc)}")
            return
        if applied < expected and not queue.migrates_on_first_use:
            report.add(
                "problem",
                f"schema version {applied}, this code needs {expected}, and the connection has "
                "`migrate = false`, so every command on it fails until you run "
                "`rainier-queue migrate`",
            )
        elif applied < expected:
            report.add(
                "warn",
                f"schema version {applied}, this code expects {expected}: the first command "
                "on it migrates it (`migrate = true`, the default); run `rainier-queue migrate` "
                "to do it now",
            )
        else:
            report.add("ok", f"reachable; schema version {applied} (this code expects {expected})")
    else:
        try:
            await queue.size(loaded.manager.default_queues()[0])
        except BrokerError as exc:
            report.add("problem", f"cannot reach it: {message_for(exc)}")
            return
        except Exception as exc:  # a driver that cannot count (inline) is still usable
            report.add("warn", f"cannot count its jobs: {exc}")
        else:
            report.add("ok", "reachable")
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
        loaded.queue(name).capabilities.shared_between_processes
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

# SPDX-License-Identifier: MIT
"""`workers`, `jobs --running` and `job ID`: which workers are up, what runs where, and one job.

Why: "is anything working on this?" and "what happened to job X?" are the
questions after "is work piling up?" (`size`). The answers come from the
connection's own store (`lookup.py`): the heartbeats workers write on a
cadence, and the driver's lookup by id. As elsewhere in the CLI, a table
for a person and `--json` for a script, from the same data; a driver that
cannot answer says why instead of printing an empty table.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from .. import lookup
from .._clock import utcnow
from ..durations import human_duration
from ..envelope import format_time
from ..errors import UnsupportedOperation
from ..jobstate import JobState, WorkerBeat
from .exit_codes import ExitCode
from .loading import Loaded
from .output import Problem, echo, first_line, note, stdout_console, table
from .runtime import State, run_command, warn_if_private


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ago(moment: datetime, now: datetime) -> str:
    return human_duration(max(now - moment, now - now))


async def _beats(loaded: Loaded, connection: str | None) -> list[WorkerBeat]:
    target = loaded.queue(connection)
    warn_if_private(target)
    try:
        return await lookup.workers(target)
    except UnsupportedOperation as exc:
        raise Problem(str(exc)) from None


def _beat_dict(beat: WorkerBeat, now: datetime) -> dict[str, Any]:
    return {
        "id": beat.worker_id,
        "host": beat.host,
        "pid": beat.pid,
        "queues": list(beat.queues),
        "concurrency": beat.concurrency,
        "started_at": format_time(beat.started_at),
        "last_beat": format_time(beat.last_beat),
        "state": _state_of(beat, now),
        "running": [
            {
                "id": job.job_id,
                "name": job.name,
                "queue": job.queue,
                "attempt": job.attempt,
                "started_at": format_time(job.started_at),
            }
            for job in beat.running
        ],
        "processed": beat.processed,
        "retried": beat.retried,
        "failed": beat.failed,
    }


def _state_of(beat: WorkerBeat, now: datetime) -> str:
    if beat.is_gone(now):
        return "gone"
    return "stopping" if beat.stopping else "up"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the workers as JSON.")
@click.pass_obj
def workers(state: State, as_json: bool) -> None:
    """List the workers on the connection: where, what they serve, what they run, their totals.

    A worker writes its heartbeat every 10 s; one whose last beat is over a minute
    old is shown as `gone` (it died or lost the connection), and its record expires
    an hour later. A worker that stops cleanly removes its own.
    """

    async def body(loaded: Loaded) -> int:
        beats = await _beats(loaded, state.settings.connection)
        now = utcnow()
        if as_json:
            echo(json.dumps([_beat_dict(b, now) for b in beats]))
            return 0
        if not beats:
            note("no workers have a heartbeat on this connection")
            return 0
        rows = [
            (
                b.worker_id,
                _state_of(b, now),
                ", ".join(b.queues),
                f"{len(b.running)}/{b.concurrency}",
                _when(b.started_at),
                f"{_ago(b.last_beat, now)} ago",
                b.processed,
                b.retried,
                b.failed,
            )
            for b in beats
        ]
        columns = [
            "worker",
            "state",
            "queues",
            "running",
            "started (UTC)",
            "last beat",
            "done",
            "retried",
            "failed",
        ]
        stdout_console().print(table(columns, rows, whole=("worker",)))
        return 0

    run_command(state, body)


@click.command()
@click.option("--running", is_flag=True, help="The jobs workers run now, and where.")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON.")
@click.pass_obj
def jobs(state: State, running: bool, as_json: bool) -> None:
    """List jobs: with --running, what each live worker runs now, since when, which attempt."""
    if not running:
        raise Problem(
            "say which jobs to list: --running (what workers run now); `job ID` shows one job, "
            "`failed` the failed ones, `size --states` how many wait"
        )

    async def body(loaded: Loaded) -> int:
        beats = [b for b in await _beats(loaded, state.settings.connection)]
        now = utcnow()
        found = [(b, job) for b in beats if not b.is_gone(now) for job in b.running]
        if as_json:
            listed = [
                {
                    "id": job.job_id,
                    "name": job.name,
                    "queue": job.queue,
                    "attempt": job.attempt,
                    "started_at": format_time(job.started_at),
                    "worker": b.worker_id,
                }
                for b, job in found
            ]
            echo(json.dumps(listed))
            return 0
        if not found:
            note("no live worker runs a job now")
            return 0
        rows = [
            (
                job.job_id,
                job.name,
                job.queue,
                job.attempt,
                b.worker_id,
                _when(job.started_at),
                _ago(job.started_at, now),
            )
            for b, job in sorted(found, key=lambda pair: pair[1].started_at)
        ]
        columns = ["id", "name", "queue", "attempt", "worker", "started (UTC)", "running for"]
        stdout_console().print(table(columns, rows, whole=("id", "worker")))
        note(f"as of the workers' last heartbeats (every {human_duration(beats[0].every)})")
        return 0

    run_command(state, body)


@click.command()
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the job's state as JSON.")
@click.pass_obj
def job(state: State, job_id: str, as_json: bool) -> None:
    """Show where job ID is: queued, delayed, running, succeeded, failed, cancelled, or unknown.

    Exits 0 when the job is found, 1 when it failed, and 4 when it is unknown.
    """

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        warn_if_private(target)
        found = await lookup.status(target, job_id)
        if as_json:
            echo(json.dumps(_state_dict(found), default=repr))
        else:
            _print_state(found)
        if found.status == "failed":
            return int(ExitCode.JOB_FAILED)
        if found.status == "unknown":
            return int(ExitCode.PROBLEMS)
        return 0

    run_command(state, body)


def _state_dict(state: JobState) -> dict[str, Any]:
    data: dict[str, Any] = {"id": state.job_id, "status": state.status}
    for name in ("name", "queue", "attempts", "max_attempts", "worker", "error", "reason"):
        value = getattr(state, name)
        if value is not None:
            data[name] = value
    for name in ("due_at", "since", "lease_until", "finished_at"):
        moment = getattr(state, name)
        if moment is not None:
            data[name] = format_time(moment)
    if state.has_result:
        data["result"] = state.result
    if state.attempt_history:
        data["attempt_history"] = [past.to_data() for past in state.attempt_history]
    if state.job is not None:
        data["payload"] = state.job.payload
    return data


def _print_state(state: JobState) -> None:
    echo(f"id:        {state.job_id}")
    echo(f"status:    {state.status}")
    if state.name is not None:
        echo(f"name:      {state.name}")
        echo(f"queue:     {state.queue}")
    if state.attempts is not None:
        of = f"/{state.max_attempts}" if state.max_attempts is not None else ""
        echo(f"attempts:  {state.attempts}{of}")
    if state.due_at is not None:
        echo(f"due at:    {_when(state.due_at)} UTC")
    if state.status == "running":
        echo(f"worker:    {state.worker or 'not listed by a live heartbeat'}")
        if state.since is not None:
            echo(f"since:     {_when(state.since)} UTC")
    if state.lease_until is not None:
        echo(f"lease:     until {_when(state.lease_until)} UTC")
    if state.finished_at is not None:
        echo(f"finished:  {_when(state.finished_at)} UTC")
    if state.status == "succeeded" and state.worker:
        echo(f"worker:    {state.worker}")
    if state.has_result:
        echo(f"result:    {lookup.describe_result(state.result)}")
    if state.job is not None:
        echo(f"payload:   {json.dumps(state.job.payload, ensure_ascii=False)}")
    if state.error is not None:
        echo(f"error:     {first_line(state.error)}")
        echo(f"           `rainier-queue failed {state.job_id}` shows it whole")
    if state.reason is not None:
        echo(f"note:      {state.reason}")
    if state.attempt_history:
        echo("attempts that did not succeed:")
        for past in state.attempt_history:
            echo(
                f"  {past.number}. {_when(past.at)} UTC on {past.worker}: {first_line(past.error)}"
            )


__all__ = ["job", "jobs", "workers"]

# SPDX-License-Identifier: MIT
"""`size` and `failed`: looking at queues without changing them.

The first questions in an incident are "is work piling up?" and "what is
failing, and why?". Both answers come as a table for a person and as JSON
(`--json`) for a script or a monitoring check, from the same data.
"""

from __future__ import annotations

import json
from datetime import UTC

import click

from ..envelope import format_time
from ..queue import Countable, FailedJob, FailedJobListing, Pausable, QueueCounts
from .exit_codes import ExitCode
from .failed_ids import SEARCHED, lookup, short_id
from .loading import Loaded
from .output import Problem, echo, first_line, note, stdout_console, table
from .runtime import State, failed_listing, run_command, warn_if_private


@click.command()
@click.argument("queues", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print {queue: size} as JSON.")
@click.option(
    "--states",
    is_flag=True,
    help="With --json: {queue: {waiting, delayed, reserved, paused}} instead of one number "
    "each (paused only where the connection can pause a queue).",
)
@click.pass_obj
def size(state: State, queues: tuple[str, ...], as_json: bool, states: bool) -> None:
    """How many jobs each QUEUE holds: waiting, delayed, and reserved by workers.

    Reserved jobs are running, or held by a worker that died until their lease
    lapses. A paused queue (`pause`) says so. `--json` prints the size the queue
    reports (waiting and delayed, not reserved), unless `--states` is given too.

    With no QUEUE: the worker's default queues and every queue a registered job names.
    """

    async def body(loaded: Loaded) -> int:
        queue = loaded.queue(state.settings.connection)
        warn_if_private(queue)
        names = list(queues) or _known_queues(loaded)
        counts = (
            {name: await queue.counts(name) for name in names}
            if isinstance(queue, Countable)
            else None
        )
        paused = (
            await queue.paused(names)
            if queue.capabilities.pausable and isinstance(queue, Pausable)
            else None
        )
        if as_json:
            if counts is None and states:
                raise Problem(f"the {queue.describe()} connection cannot count jobs by state")
            if counts is not None and states:
                echo(json.dumps({name: _by_state(c, name, paused) for name, c in counts.items()}))
            else:
                echo(json.dumps({name: await queue.size(name) for name in names}))
            return 0
        echo(
            f"connection `{loaded.connection_name(state.settings.connection)}`: {queue.describe()}"
        )
        if counts is None:
            rows = [(_named(name, paused), await queue.size(name)) for name in names]
            stdout_console().print(table(["queue", "waiting"], rows))
            return 0
        by_state = [
            (_named(name, paused), c.waiting, c.delayed, c.reserved) for name, c in counts.items()
        ]
        stdout_console().print(table(["queue", "waiting", "delayed", "reserved"], by_state))
        return 0

    run_command(state, body)


def _by_state(
    counts: QueueCounts, name: str, paused: frozenset[str] | None
) -> dict[str, int | bool]:
    shown: dict[str, int | bool] = {
        "waiting": counts.waiting,
        "delayed": counts.delayed,
        "reserved": counts.reserved,
    }
    if paused is not None:
        shown["paused"] = name in paused
    return shown


def _named(name: str, paused: frozenset[str] | None) -> str:
    """A queue's name for the table, marked when it is paused."""
    return f"{name} (paused)" if paused is not None and name in paused else name


def _known_queues(loaded: Loaded) -> list[str]:
    names = dict.fromkeys(loaded.manager.default_queues())
    names.update(dict.fromkeys(loaded.registry.queues()))
    return list(names)


@click.command()
@click.argument("job_id", metavar="[ID]", required=False)
@click.option("--queue", help="Only failed jobs from this queue.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many to show."
)
@click.option("--json", "as_json", is_flag=True, help="Print the failed jobs as JSON.")
@click.option(
    "--wide", is_flag=True, help="Show whole ids (the table shows each id's random last part)."
)
@click.pass_obj
def failed(
    state: State, job_id: str | None, queue: str | None, limit: int, as_json: bool, wide: bool
) -> None:
    """List failed jobs, newest first: id, name, queue, attempts, when, and the error.

    With an ID (short or whole, as listed), show that one job: its whole error,
    traceback included, and its payload. `retry` and `forget` take the same ids.
    """

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        store = failed_listing(target)
        warn_if_private(target)
        if job_id is not None:
            return await _show_one(store, job_id, as_json=as_json)
        jobs = await store.failed_jobs(queue=queue, limit=limit)
        if as_json:
            echo(_json_text([_as_dict(f) for f in jobs]))
            return 0
        if not jobs:
            note("no failed jobs" + (f" on queue `{queue}`" if queue else ""))
            return 0
        rows = [
            (
                _shown(f.job.id if wide else short_id(f.job.id)),
                _shown(f.job.name),
                _shown(f.job.queue),
                f"{f.job.attempts}/{f.job.max_attempts}",
                f.failed_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
                _shown(first_line(f.error)),
            )
            for f in jobs
        ]
        columns = ["id", "name", "queue", "attempts", "failed at (UTC)", "error"]
        echo(f"failed jobs, newest first ({len(jobs)}):")
        # The id is what `retry` and `forget` take: it is never folded; the error is.
        stdout_console().print(table(columns, rows, whole=("id",)))
        if len(jobs) == limit:
            note(f"showing the newest {limit}; pass --limit for more")
        return 0

    run_command(state, body)


async def _show_one(store: FailedJobListing, given: str, *, as_json: bool) -> int:
    """One failed job, whole: its fields, its payload and its error with the traceback."""
    found = await lookup(store, given)
    whole = given.removeprefix("…").removeprefix("...")
    matches = found.matches if whole not in found.matches else (whole,)
    if len(matches) > 1:
        listed = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise Problem(f"{given} is part of {len(matches)} failed jobs' ids ({listed}); give more")
    chosen = next(
        (f for f in await store.failed_jobs(limit=SEARCHED) if matches and f.job.id == matches[0]),
        None,
    )
    if chosen is None:
        where = "" if found.searched_all else f" among the newest {SEARCHED} failed jobs"
        raise Problem(
            f"no failed job has id {given}{where}; `failed --wide` lists whole ids",
            ExitCode.JOB_FAILED,
        )
    if as_json:
        echo(_json_text(_as_dict(chosen)))
        return 0
    job = chosen.job
    echo(f"id:        {_shown(job.id)}")
    echo(f"name:      {_shown(job.name)}")
    echo(f"queue:     {_shown(job.queue)}")
    echo(f"attempts:  {job.attempts}/{job.max_attempts}")
    echo(f"failed at: {chosen.failed_at.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')} UTC")
    echo(f"payload:   {_shown(_json_text(job.payload))}")
    echo("error:")
    echo(_shown(chosen.error.rstrip()))
    return 0


def _json_text(data: object) -> str:
    """JSON with its text as written, or with ASCII escapes where the text cannot be UTF-8.

    A failed record may hold anything a producer wrote (a lone surrogate, say);
    the listing prints it rather than failing for the whole store.
    """
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data)
    return text


def _shown(text: str) -> str:
    """`text` for a terminal: anything that is not valid text shown as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _as_dict(failed_job: FailedJob) -> dict[str, object]:
    job = failed_job.job
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "failed_at": format_time(failed_job.failed_at),
        "error": failed_job.error,
        "payload": job.payload,
    }


__all__ = ["failed", "size"]

# SPDX-License-Identifier: MIT
"""`clear`, `retry`, `forget`, `flush`: the commands that change a queue's jobs.

Each one that destroys jobs (`clear`, `flush`) refuses to run without
`--yes`, and says how many jobs it would take, because there is no undo.
`retry` and `forget` take ids as `failed` prints them (short or whole, see
`failed_ids`) and report each one they could not find (exit 1), so a typo
is not mistaken for success.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import click

from ..failed_retries import BATCH, retry_all_failed
from ..queue import FailedJobListing, FailedJobStore
from .exit_codes import ExitCode
from .failed_ids import SEARCHED, lookup
from .loading import Loaded
from .output import Problem, echo, note, say_error
from .runtime import State, failed_store, run_command, warn_if_private


@click.command()
@click.argument("queue")
@click.option("--yes", is_flag=True, help="Really delete every waiting job on QUEUE.")
@click.pass_obj
def clear(state: State, queue: str, yes: bool) -> None:
    """Delete every job waiting on QUEUE (running jobs finish; failed jobs stay)."""

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        warn_if_private(target)
        if not yes:
            waiting = await target.size(queue)
            raise Problem(
                f"`clear` deletes every job waiting on `{queue}` ({waiting} now) and cannot be "
                "undone; run it again with --yes"
            )
        removed = await target.clear(queue)
        echo(f"cleared {removed} job(s) from queue `{queue}`")
        return 0

    run_command(state, body)


@click.command()
@click.argument("ids", nargs=-1)
@click.option("--all", "retry_all", is_flag=True, help="Retry every failed job.")
@click.option("--queue", help="With --all: only failed jobs from this queue.")
@click.pass_obj
def retry(state: State, ids: tuple[str, ...], retry_all: bool, queue: str | None) -> None:
    """Put failed jobs back on their queues, with all their attempts: ID... or --all."""
    if retry_all == bool(ids):
        raise Problem("give the ids of failed jobs to retry (see `failed`), or --all, not both")
    if queue is not None and not retry_all:
        raise Problem("--queue goes with --all; ids already say which jobs to retry")

    async def body(loaded: Loaded) -> int:
        store = _store(loaded, state)
        if retry_all:
            count = await retry_all_failed(store, queue=queue)
            where = f" from queue `{queue}`" if queue else ""
            echo(f"retried {count} failed job(s){where}")
            return 0
        return await _each(ids, store, store.retry_failed, "retried")

    run_command(state, body)


@click.command()
@click.argument("ids", nargs=-1, required=True)
@click.pass_obj
def forget(state: State, ids: tuple[str, ...]) -> None:
    """Delete failed jobs by ID, for good."""

    async def body(loaded: Loaded) -> int:
        store = _store(loaded, state)
        return await _each(ids, store, store.forget_failed, "forgot")

    run_command(state, body)


@click.command()
@click.option("--queue", help="Only failed jobs from this queue.")
@click.option("--yes", is_flag=True, help="Really delete the failed jobs.")
@click.pass_obj
def flush(state: State, queue: str | None, yes: bool) -> None:
    """Delete every failed job (of one --queue, or all), for good."""

    async def body(loaded: Loaded) -> int:
        store = _store(loaded, state)
        if not yes:
            some = len(await store.failed_jobs(queue=queue, limit=BATCH))
            count = f"{some}" if some < BATCH else f"at least {BATCH}"
            where = f" of queue `{queue}`" if queue else ""
            raise Problem(
                f"`flush` deletes every failed job{where} ({count} now) and cannot be undone; "
                "run it again with --yes"
            )
        removed = await store.flush_failed(queue=queue)
        echo(f"flushed {removed} failed job(s)" + (f" of queue `{queue}`" if queue else ""))
        return 0

    run_command(state, body)


def _store(loaded: Loaded, state: State) -> FailedJobStore:
    target = loaded.queue(state.settings.connection)
    store = failed_store(target)
    warn_if_private(target)
    return store


async def _each(
    ids: tuple[str, ...],
    store: FailedJobListing,
    action: Callable[[str], Awaitable[bool]],
    verb: str,
) -> int:
    missing = 0
    for given in ids:
        job_id = given if await action(given) else await _whole_id(store, given)
        if job_id is None:
            missing += 1
        elif job_id == given or await action(job_id):
            echo(f"{verb} {job_id}")
        else:  # gone between the lookup and the action: retried or forgotten elsewhere
            missing += 1
            say_error(f"no failed job has id {job_id}")
    if missing:
        note(f"{len(ids) - missing} of {len(ids)} done")
        return ExitCode.JOB_FAILED
    return 0


async def _whole_id(store: FailedJobListing, given: str) -> str | None:
    """The one failed job `given` is a short form of, or None after saying why not."""
    found = await lookup(store, given)
    if len(found.matches) == 1:
        return found.matches[0]
    if found.matches:
        listed = ", ".join(found.matches[:5]) + (", ..." if len(found.matches) > 5 else "")
        say_error(
            f"{given} is part of {len(found.matches)} failed jobs' ids ({listed}); "
            "give more of it, or the whole id (`failed --wide`)"
        )
        return None
    where = "" if found.searched_all else f" among the newest {SEARCHED} failed jobs"
    say_error(f"no failed job has id {given}{where}; `failed --wide` lists whole ids")
    return None


__all__ = ["clear", "flush", "forget", "retry"]

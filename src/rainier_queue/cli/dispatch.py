# SPDX-License-Identifier: MIT
"""`rainier-queue dispatch`: push a job from a shell, checked as the application would check it.

A job dispatched by hand (to test a worker, to replay something, to poke a
queue during an incident) should fail on a bad payload exactly as a
dispatch from the application does: at once, here, with the field that is
wrong, not hours later in a worker. So with `--app` the envelope is built
by the job's own class through the manager (unique jobs stay unique).
Without one there is nothing to check against; the envelope is pushed raw
with a warning, which is still useful for a worker in another language or
a job whose code is not installed here.
"""

from __future__ import annotations

import difflib
from datetime import timedelta
from typing import Any

import click

from ..envelope import QueuedJob
from ..envelope.fields import parse_json
from ..errors import MalformedEntry, PayloadError, UnknownJob
from ..job import Job
from .loading import Loaded
from .output import Problem, echo, note, warn
from .runtime import State, run_command, warn_if_private
from .work import DURATION


@click.command()
@click.argument("name")
@click.option("--payload", default="{}", show_default=True, help="The job's fields, as JSON.")
@click.option("--queue", help="Send to this queue instead of the job's own.")
@click.option("--delay", **DURATION, help="Make the job due after this long (30s, 5m, ...).")
@click.option("--tries", type=click.IntRange(min=1), help="Override the job's tries.")
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="How many to push."
)
@click.pass_obj
def dispatch(
    state: State,
    name: str,
    payload: str,
    queue: str | None,
    delay: timedelta | None,
    tries: int | None,
    count: int,
) -> None:
    """Dispatch job NAME with --payload; prints each job id."""
    data = _parse_payload(payload)
    if queue is not None and not queue.strip():
        raise Problem("--queue needs a queue name")

    async def body(loaded: Loaded) -> int:
        if loaded.app is None:
            return await _push_raw(loaded, state, name, data, queue, delay, tries, count)
        job = _build(loaded, name, data)
        warn_if_private(loaded.queue(state.settings.connection))
        overrides = (queue, delay, tries, state.settings.connection)
        if count > 1 and all(value is None for value in overrides):
            # One bulk push (one transaction on a database) instead of `count` of them.
            results = await loaded.manager.dispatch_many([job] * count)
        else:
            pending = loaded.manager.pending(job)
            if queue is not None:
                try:
                    pending.on_queue(queue)
                except ValueError as exc:
                    raise Problem(f"--queue: {exc}") from exc
            if delay is not None:
                pending.delay(delay)
            if tries is not None:
                pending.tries(tries)
            if state.settings.connection is not None:
                pending.on_connection(state.settings.connection)
            results = [await pending.send() for _ in range(count)]
        for job_id in results:
            if job_id is not None:
                echo(job_id)
        dropped = results.count(None)
        target = queue or job.queue_name()
        where = loaded.connection_name(state.settings.connection)
        note(f"dispatched {count - dropped} `{name}` job(s) to queue `{target}` on `{where}`")
        if dropped:
            warn(f"{dropped} dropped as duplicates of a unique `{name}` job that is still waiting")
        return 0

    run_command(state, body)


def _parse_payload(text: str) -> Any:
    try:
        return parse_json(text, "--payload")
    except MalformedEntry as exc:
        if exc.problem.startswith("is not JSON"):
            raise Problem(
                f"--payload {exc.problem}; quote it, as in --payload '{{\"n\": 1}}'"
            ) from None
        raise Problem(f"--payload {exc.problem}, which workers refuse to read") from None


def _build(loaded: Loaded, name: str, data: Any) -> Job:
    cls = _job_class(loaded, name)
    try:
        return cls.from_payload(data)
    except PayloadError as exc:
        stored = f"the stored payload of job `{name}` has diverged from {cls.__qualname__}"
        text = str(exc)
        detail = text.removeprefix(stored).lstrip(":").strip() if text.startswith(stored) else text
        joiner = " " if detail.startswith("at ") else ": "
        raise Problem(
            f"the payload does not fit job `{name}` ({cls.__qualname__}){joiner}{detail}"
        ) from exc


def _job_class(loaded: Loaded, name: str) -> type[Job]:
    """The job class `name` is registered as, or a refusal that names the likely one.

    The worker's advice for an unknown name (deploy a handler, then retry) is
    wrong here: nothing was sent yet, and the name is more often misspelt.
    """
    try:
        return loaded.registry.get(name)
    except UnknownJob:
        names = loaded.registry.names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        listed = ", ".join(f"`{n}`" for n in names) if names else "none"
        where = loaded.app.spec if loaded.app is not None else "the registry --app names"
        raise Problem(
            f"no job is registered under the name `{name}`; {hint}The jobs {where} registers "
            f"are: {listed}. Check the spelling, or register the job there"
        ) from None


async def _push_raw(
    loaded: Loaded,
    state: State,
    name: str,
    data: Any,
    queue: str | None,
    delay: timedelta | None,
    tries: int | None,
    count: int,
) -> int:
    warn(
        f"no --app given, so the payload is not checked against job `{name}`'s fields; "
        "pushing a raw envelope (a worker that cannot read it sends it to the failed store)"
    )
    target = loaded.queue(state.settings.connection)
    warn_if_private(target)
    jobs = [
        QueuedJob.create(
            name, data, queue=queue or "default", max_attempts=tries or Job.tries, delay=delay
        )
        for _ in range(count)
    ]
    await target.push_many(target.sealed(jobs))
    for job in jobs:
        echo(job.id)
    where = loaded.connection_name(state.settings.connection)
    note(f"dispatched {count} raw `{name}` job(s) to queue `{queue or 'default'}` on `{where}`")
    return 0


__all__ = ["dispatch"]

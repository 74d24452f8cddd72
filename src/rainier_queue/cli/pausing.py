# SPDX-License-Identifier: MIT
"""`pause` and `resume`: stop workers taking a queue's jobs, and let them again.

The commonest way to stop a queue in an incident is to stop its workers,
which also stops every other queue they serve, and has to be undone on
every machine. A pause is one mark in the connection's store instead: every
worker that serves the queue, wherever it runs, takes none of its jobs
within its `pause_check`, while pushes go on being accepted and counted
(`size` shows the queue as paused). On a driver with no store every worker
reads, the command refuses and says so, and nothing changes.
"""

from __future__ import annotations

import click

from ..steering import pausable
from .loading import Loaded
from .output import echo, note
from .runtime import State, run_command, warn_if_private


@click.command()
@click.argument("queues", nargs=-1, required=True)
@click.pass_obj
def pause(state: State, queues: tuple[str, ...]) -> None:
    """Pause QUEUE...: workers take none of its jobs until `resume`; pushes are still taken."""

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        store = pausable(target)
        warn_if_private(target)
        for queue in queues:
            if await store.pause(queue):
                echo(f"paused queue `{queue}`: workers take none of its jobs until it is resumed")
            else:
                echo(f"queue `{queue}` was paused already")
        note(
            "running workers see it within their --pause-check (1s by default); "
            "jobs already running finish"
        )
        return 0

    run_command(state, body)


@click.command()
@click.argument("queues", nargs=-1, required=True)
@click.pass_obj
def resume(state: State, queues: tuple[str, ...]) -> None:
    """Resume QUEUE...: workers take its jobs again."""

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        store = pausable(target)
        warn_if_private(target)
        for queue in queues:
            if await store.resume(queue):
                echo(f"resumed queue `{queue}`: workers take its jobs again")
            else:
                echo(f"queue `{queue}` was not paused")
        return 0

    run_command(state, body)


__all__ = ["pause", "resume"]

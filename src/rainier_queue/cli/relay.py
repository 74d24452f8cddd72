# SPDX-License-Identifier: MIT
"""`relay`: move committed outbox rows to their connections, until stopped.

Why a command of its own: the relay is to the outbox what a worker is to a
queue, a long-running process a deploy starts (one or several, on any
machines: they share the rows safely), and it needs no job handlers. It
relays every connection that has an outbox, or the one `--connection`
names; SIGTERM or Ctrl-C stops it after the batch in hand (an idle relay
within `--idle-wait`), which leaves nothing half-done (a row is deleted
only after its target confirmed it).
`--drain` relays what is committed now and exits, for scripts and tests.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta

import click

from ..outbox import DEFAULT_BATCH, Relay, RelaySettings
from .exit_codes import ExitCode
from .loading import Loaded
from .output import Problem, echo
from .runtime import State, run_command


@click.command()
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH,
    show_default=True,
    help="Rows claimed, pushed and deleted at a time.",
)
@click.option(
    "--idle-wait",
    type=click.FloatRange(min=0.01),
    default=5.0,
    show_default=True,
    help="Seconds an idle relay waits for a wake-up before it looks again.",
)
@click.option("--drain", is_flag=True, help="Relay what is committed now, then exit.")
@click.pass_obj
def relay(state: State, batch: int, idle_wait: float, drain: bool) -> None:
    """Move committed outbox rows to their connections (every one with an outbox)."""
    settings = RelaySettings(batch=batch, idle_wait=timedelta(seconds=idle_wait))

    async def body(loaded: Loaded) -> int:
        names = (
            [state.settings.connection]
            if state.settings.connection is not None
            else loaded.manager.connection_names()
        )
        relays = []
        for name in names:
            outbox = loaded.manager.outbox(name)
            if outbox is not None:
                relays.append(Relay(outbox, loaded.queue(name), settings))
        if not relays:
            raise Problem(
                "no connection here has an outbox: give one an `outbox` key (the URL of the "
                "application's database), as docs/outbox.md shows"
            )
        if drain:
            for one in relays:
                moved = await one.drain()
                echo(f"{one.outbox.target}: relayed {moved} outbox rows")
            return ExitCode.OK
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        for one in relays:
            echo(f"relaying the {one.outbox.describe()} to {one.target.describe()}")
        await asyncio.gather(*(one.run(stop) for one in relays))
        return ExitCode.OK

    run_command(state, body)


__all__ = ["relay"]

# SPDX-License-Identifier: MIT
"""`reencrypt` and `encryption-key`: the two steps of a key rotation a person runs.

A rotation (docs/encryption.md) is: make a key (`encryption-key`), add it
to every worker's ring, make it the current one so new pushes use it, then
move the jobs already stored onto it (`reencrypt`) so the old key can
leave the ring. The last step needs a driver that can change a stored job
(`RewritesStoredJobs`: the SQL drivers, memory); on a log or a broker,
whose messages cannot be changed once written, the command says so and
what to do instead (keep the old key until its jobs have drained), and
exits 4.

`reencrypt` reports per connection how many jobs it moved from which key,
and each job it could not open (its key id, never a key), and exits 1 if
there was one: those jobs keep their old seal until the key they name is
put back in the ring.
"""

from __future__ import annotations

import base64
import os

import click

from .. import encryption
from ..envelope.sealing import KEY_BYTES
from ..errors import UnsupportedOperation
from ..queue import Queue
from .exit_codes import ExitCode
from .loading import Loaded
from .output import echo, say_error
from .runtime import State, run_command

SHOWN = 20
"""Jobs that could not be opened listed one by one; the rest are counted."""


@click.command()
@click.pass_obj
def reencrypt(state: State) -> None:
    """Move stored jobs to each connection's current encryption key (or --connection's).

    Waiting, delayed, running and failed jobs alike, beside running workers.
    Exit 1 if a job could not be opened (its key is not in the ring), 4 if a
    connection's driver cannot rewrite stored jobs (a log, a broker).
    """

    async def body(loaded: Loaded) -> int:
        names = (
            [state.settings.connection]
            if state.settings.connection is not None
            else loaded.manager.connection_names()
        )
        code = ExitCode.OK
        done: set[int] = set()
        for name in names:
            target = loaded.queue(name)
            if id(target) in done:
                continue
            done.add(id(target))
            code = max(code, await _reencrypt_one(name, target, chosen=len(names) == 1))
        return code

    run_command(state, body)


async def _reencrypt_one(name: str, queue: Queue, *, chosen: bool) -> ExitCode:
    if queue.payload_keys is None:
        echo(f"{name}: no `encryption` key ring; nothing to reencrypt")
        return ExitCode.PROBLEMS if chosen else ExitCode.OK
    try:
        done = await encryption.reencrypt(queue)
    except UnsupportedOperation as exc:
        say_error(f"{name}: {exc}")
        return ExitCode.PROBLEMS
    moved = ", ".join(f"{n} from `{k}`" for k, n in sorted(done.moved.items())) or "none"
    echo(f"{name}: {done.count} job(s) moved to key `{done.current}` ({moved})")
    if done.in_flight:
        say_error(
            f"{name}: {done.in_flight} job(s) held by workers were left under their key; run "
            "`reencrypt` again once they have settled, before removing an old key"
        )
    for line in done.failures[:SHOWN]:
        say_error(f"{name}: {line}")
    if len(done.failures) > SHOWN:
        say_error(f"{name}: and {len(done.failures) - SHOWN} more job(s) that would not open")
    return ExitCode.JOB_FAILED if done.failures or done.in_flight else ExitCode.OK


@click.command("encryption-key")
def encryption_key() -> None:
    """Print a new random key for an `encryption` key ring (32 bytes, URL-safe base64)."""
    echo(base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode("ascii"))


__all__ = ["encryption_key", "reencrypt"]

# SPDX-License-Identifier: MIT
"""How a write on Redis wakes idle workers: tokens on one list per prefix.

Why: an idle worker waits with a BLPOP on the prefix's wake-up list
(`waiting.py`), so whatever makes a job ready (a push, a release due now,
a retry from the failed store) pushes a token there. The list is trimmed to
`WAKE_TOKENS`, so a burst with nobody waiting leaves a few stale tokens (a
wasted look each), not one per job. Off a cluster the tokens ride behind the
write itself; on a cluster the list is on a slot of its own, so they are
commands of their own (`wake_apart`), and resending them is harmless.
"""

from __future__ import annotations

from typing import Any

from .connection import Client, translated

WAKE_TOKENS = 4
"""At most this many wake-up tokens wait in the wake list: enough to wake a few idle
workers after a burst, few enough that workers do not spin on stale ones."""


def wake_commands(wake: str, tokens: int) -> list[tuple[Any, ...]]:
    """The commands that wake `tokens` idle workers through the list `wake`."""
    return [("LPUSH", wake, *["1"] * tokens), ("LTRIM", wake, 0, WAKE_TOKENS - 1)]


async def wake_apart(client: Client, wake: str, tokens: int) -> None:
    """Wake `tokens` idle workers with commands of their own, one round trip."""
    pipe = client.pipeline(transaction=False)
    for command in wake_commands(wake, tokens):
        pipe.execute_command(*command)
    async with translated("wake workers"):
        await pipe.execute()


__all__ = ["WAKE_TOKENS", "wake_apart", "wake_commands"]

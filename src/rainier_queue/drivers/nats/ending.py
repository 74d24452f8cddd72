# SPDX-License-Identifier: MIT
"""Ending the driver's background tasks for sure, even when a call inside one swallows the
cancellation.

A worker's queue runs two loops per queue it serves (the delay mover and the
sweep for undeliverable messages), and `aclose` ends them by cancelling. On
Python 3.11, `asyncio.wait_for` returns its inner call's result instead of
raising when the cancellation lands in the moment that call completes, and
nats-py waits for every request's answer with it. A loop whose cancellation
was swallowed that way simply goes round again, and a close that cancelled
it once and then awaited it waited for ever: a draining CLI worker that had
finished its jobs never exited. So the tasks are cancelled again until they
end, which costs nothing when the first cancellation holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

AGAIN_AFTER = 0.1
"""Seconds between cancellations of a task that has not ended yet."""


async def cancel_for_sure(tasks: Sequence[asyncio.Future[None]]) -> None:
    """Cancel `tasks` and wait until every one has ended, cancelling again if need be."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=AGAIN_AFTER)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved, so an error that ended it is not reported as lost


__all__ = ["cancel_for_sure"]

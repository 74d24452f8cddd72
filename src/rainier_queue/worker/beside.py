# SPDX-License-Identifier: MIT
"""The tasks that run beside a worker's serving loop, and how they are stopped.

Why apart: the loop (loop.py) reserves, runs and settles; next to it, for a
whole run, go the lease keeper (leases.py), the pause watch (pauses.py),
the cancel watch (cancels.py) and the heartbeat (heartbeat.py). Each starts
with the run and must end with it, whatever their client library does: a
read that catches its task's cancellation mid-call (redis-py has such paths,
and the NATS client's key-value watch) would otherwise go round again and
hold the worker's stop up for ever. So each is stopped by a flag first and
cancelled second, and the run waits for all of them.

The watches read once before the loop starts, so a queue paused, or a job
cancelled, before the worker came up is never served.
"""

from __future__ import annotations

import asyncio

from .cancels import CancelWatch
from .heartbeat import Heartbeat
from .leases import LeaseKeeper
from .pauses import PauseWatch


class Beside:
    """Starts and stops the keeper, the watches and the heartbeat of one run."""

    def __init__(
        self,
        keeper: LeaseKeeper,
        pauses: PauseWatch | None,
        cancels: CancelWatch | None,
        heartbeat: Heartbeat | None,
    ) -> None:
        self._keeper = keeper
        self._pauses = pauses
        self._cancels = cancels
        self._heartbeat = heartbeat
        self._tasks: list[asyncio.Task[None]] = []
        self._beating: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the keeper; read the pauses and cancels once, then keep watching them."""
        self._tasks.append(
            asyncio.create_task(self._keeper.run(), name="rainier-queue lease keeper")
        )
        if self._pauses is not None:
            await self._pauses.check()
            self._tasks.append(
                asyncio.create_task(self._pauses.run(), name="rainier-queue pause watch")
            )
        if self._cancels is not None:
            await self._cancels.check()
            self._tasks.append(
                asyncio.create_task(self._cancels.run(), name="rainier-queue cancel watch")
            )
        if self._heartbeat is not None:
            self._beating = asyncio.create_task(
                self._heartbeat.run(), name="rainier-queue heartbeat"
            )

    async def stop(self) -> None:
        """Stop every task (flag, then cancel) and wait; the heartbeat last, its record
        removed, so the worker shows as running until everything else has ended."""
        self._keeper.stop()
        if self._pauses is not None:
            self._pauses.stop()
        if self._cancels is not None:
            self._cancels.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._beating is not None and self._heartbeat is not None:
            self._heartbeat.stop()
            self._beating.cancel()
            await asyncio.gather(self._beating, return_exceptions=True)
            await self._heartbeat.remove()


__all__ = ["Beside"]

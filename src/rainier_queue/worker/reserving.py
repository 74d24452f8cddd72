# SPDX-License-Identifier: MIT
"""The worker's reserving half: bringing jobs into free slots, in the background.

The loop (`loop.py`) decides *when* to reserve and for how many slots; this
object decides *how*, and keeps the books of reserves on their way. Kept
apart because the how is most of the fiddly part and none of the life cycle:

- the queues are asked in priority order, in batches of at most `prefetch`,
  and a queue that comes back short passes the rest to the next one;
- the acknowledgements waiting in the batcher (`acks.py`) ride along with
  the reserve when the driver can send both in one round trip
  (`Queue.acknowledge_and_reserve`), so a busy worker pays one round trip
  per batch;
- an idle worker on one queue may send its reserve with its wait
  (`Queue.wait_and_reserve`); a stop, or a job going back to the queue,
  cuts that wait short (`cut_wait_short`);
- each reserve runs as a task of its own, so a second may set off before
  the first is back, and what each found waits in `next_finished()` for the
  loop, which `wake` tells;
- the slots a reserve was given are set aside (`Slots.requested`) until its
  jobs start in them, and given back by whatever path the reserve ends,
  including a task cancelled before its first step.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from collections.abc import Callable
from datetime import timedelta
from typing import NamedTuple

from ..queue import Queue, Reservation
from .acks import AckBatcher
from .leases import LeaseKeeper
from .options import WorkerOptions
from .pace import Pace
from .slots import Slot, Slots


class Filled(NamedTuple):
    """What one background reserve found."""

    taken: int
    ran_short: bool
    """The queues had fewer jobs than the reserve could take."""
    error: BaseException | None


class Reserver:
    """Fills the worker's free slots from its queues, each fill a task of its own."""

    def __init__(
        self,
        queue: Queue,
        options: WorkerOptions,
        slots: Slots,
        keeper: LeaseKeeper,
        *,
        acks: AckBatcher | None,
        pace: Pace | None,
        wake: Callable[[], None],
        is_stopping: Callable[[], bool],
    ) -> None:
        self._queue = queue
        self._options = options
        self._slots = slots
        self._keeper = keeper
        self._acks = acks
        """The batcher whose waiting acknowledgements ride along with a reserve; None when
        the driver cannot send both in one round trip."""
        self._pace = pace
        """Where a reserve's round trip is measured, while the worker may reserve ahead."""
        self._wake = wake
        self._is_stopping = is_stopping
        self._fills: set[asyncio.Task[None]] = set()
        self._waiting_fill: asyncio.Task[None] | None = None
        """The fill that waits for work before it reserves, while one does."""
        self._filled: collections.deque[Filled] = collections.deque()
        self.queues: tuple[str, ...] = options.queues
        """The queues to reserve from, in priority order: the worker's, less those paused
        (`pauses.py` changes it; a worker on a driver that cannot pause never does)."""

    @property
    def in_flight(self) -> int:
        """Reserves on their way."""
        return len(self._fills)

    def next_finished(self) -> Filled | None:
        """What the oldest reserve that came back and was not yet asked about found, if any."""
        return self._filled.popleft() if self._filled else None

    def launch(self, free: int, *, wait: timedelta | None = None) -> None:
        """Reserve into `free` slots in the background; the loop hears of it through `wake`.

        With work waiting, a second reserve may start while the first is on
        its way, so a broker that takes a while to answer (a database that
        flushes to disk before it commits) is not a pause for every batch.
        With `wait`, the reserve waits up to that long for work first
        (`Queue.wait_and_reserve`); a stop, or a job that went back to the
        queue, cancels it (`cut_wait_short`).
        """
        self._slots.requested += free
        task = asyncio.create_task(self._fill_in_background(free, wait))
        self._fills.add(task)
        task.add_done_callback(functools.partial(self._fill_never_ran, free))
        if wait is not None:
            self._waiting_fill = task

    def cut_wait_short(self) -> None:
        """End an idle wait now; the driver hands back whatever its reserve took."""
        if self._waiting_fill is not None:
            self._waiting_fill.cancel()

    async def settle_down(self) -> None:
        """Let the reserves on their way come back (their jobs start); forget what they found."""
        if self._fills:
            await asyncio.gather(*self._fills, return_exceptions=True)
        self._filled.clear()

    def _fill_never_ran(self, free: int, task: asyncio.Task[None]) -> None:
        """Undo `launch` for a fill cancelled before its first step.

        A job that fails in the same loop turn as an idle wait is launched
        cuts the wait short (`cut_wait_short`) before its task has run at
        all. Cancelled before it starts, a coroutine never enters its own
        `try`, so none of the fill's bookkeeping runs: without this, its slots
        stayed set aside and the loop counted it as in flight for ever, and a
        `--stop-when-empty` worker never stopped. A fill that did start has
        done all of this itself and is gone from `_fills`.
        """
        if task not in self._fills:
            return
        self._fills.discard(task)
        self._slots.requested -= free
        if task is self._waiting_fill:
            self._waiting_fill = None
        self._wake()

    async def _fill_in_background(self, free: int, wait: timedelta | None) -> None:
        try:
            if wait is None:
                taken, short = await self._fill(free)
            else:
                taken, short = await self._fill_after_wait(free, wait)
        except Exception as exc:
            self._filled.append(Filled(0, True, exc))
        else:
            self._filled.append(Filled(taken, short, None))
        finally:
            # Gone from the set before the loop hears of it, so it counts right.
            task = asyncio.current_task()
            if task is not None:
                self._fills.discard(task)
                if task is self._waiting_fill:
                    self._waiting_fill = None
            self._wake()

    async def _fill_after_wait(self, free: int, wait: timedelta) -> tuple[int, bool]:
        """`_fill` for an idle worker on one queue: the reserve rides behind the wait."""
        limit = min(self._options.prefetch or free, free)
        try:
            batch = await self._queue.wait_and_reserve(self.queues[0], wait, limit=limit)
            free -= len(batch)
            self._take_all(batch)
            return len(batch), len(batch) < limit
        finally:
            self._slots.requested -= free

    async def _fill(self, free: int) -> tuple[int, bool]:
        """Reserve into `free` slots, queues in priority order; (jobs taken, queues ran short).

        The caller set the `free` slots aside in `Slots.requested`; they are given
        back as jobs start in them, and the rest when this returns.
        """
        taken = 0
        try:
            for name in self.queues:
                while free > 0 and not self._is_stopping():
                    limit = min(self._options.prefetch or free, free)
                    batch = await self._reserve(name, limit)
                    free -= len(batch)
                    self._take_all(batch)
                    taken += len(batch)
                    if len(batch) < limit:
                        break
                if free <= 0 or self._is_stopping():
                    return taken, False
            return taken, True
        finally:
            self._slots.requested -= free

    async def _reserve(self, name: str, limit: int) -> list[Reservation]:
        """Reserve from `name`, carrying the acknowledgements that are waiting to be sent."""
        waiting = self._acks.take() if self._acks is not None else None
        began = time.monotonic()
        if not waiting:
            batch = await self._queue.reserve(name, limit=limit)
        else:
            try:
                outcomes, batch = await self._queue.acknowledge_and_reserve(
                    waiting.reservations, name, limit=limit
                )
            except BaseException as exc:
                waiting.settle(exc)
                raise
            waiting.settle(outcomes)
        if batch and self._pace is not None:
            self._pace.reserve_took(time.monotonic() - began)
        return batch

    def _take_all(self, batch: list[Reservation]) -> None:
        """Jobs a reserve brought, into the slots set aside for them: each lease is kept from
        now on, and each job runs as soon as a slot frees."""
        self._slots.requested -= len(batch)
        for reservation in batch:
            self._slots.take(Slot(reservation=reservation, lease=self._keeper.track(reservation)))


__all__ = ["Filled", "Reserver"]

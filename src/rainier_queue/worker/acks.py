# SPDX-License-Identifier: MIT
"""Acknowledgements grouped into batches, the way databases group commits.

On a database driver, each acknowledge is a transaction, and a transaction
costs a disk flush; one flush per job caps a worker at a few thousand jobs a
second however fast the jobs are. Jobs that finish while a batch is on its
way to the broker wait for the next one, so under load many
acknowledgements share one round trip, and an idle worker still
acknowledges at once (a batch of one, sent on the next loop turn).

Each caller still gets its own result: its `LeaseLost` or the broker's
error, exactly as if it had acknowledged alone.

A job whose settle is plain (see `Settler.settle_soon`) does not even wait
for its acknowledgement: it hands the batcher a key instead of awaiting a
future (`acknowledge_soon`), and the outcomes of a batch's keys go to one
call (`told`), as plain (key, outcome) pairs: no future, no callback object
and no task switch per job.

A busy worker goes one step further: the loop that reserves the next batch
takes the waiting acknowledgements (`take`) and sends them with that
reserve (`Queue.acknowledge_and_reserve`), so a batch costs one round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..queue import Queue, Reservation

MAX_BATCH = 256


Told = Callable[[list[tuple[Any, BaseException | None]]], None]
"""Where `acknowledge_soon`'s outcomes go, one call per batch: (key, outcome) pairs,
the outcome None for a recorded acknowledgement, else the error
(`asyncio.CancelledError` when the worker itself is being cancelled)."""

Item = tuple[Reservation, "asyncio.Future[None] | None", Any]
"""One waiting acknowledgement: its reservation, and the future an awaiting caller
waits on, or None and the key `acknowledge_soon` was given."""


def _deliver(
    items: Sequence[Item],
    outcomes: Sequence[Exception | None] | BaseException,
    told: Told | None,
) -> None:
    """Hand each item its outcome (one per item, or one error for them all): a future
    its result, and the keys of `acknowledge_soon` theirs, to `told` in one call."""
    keys: list[tuple[Any, BaseException | None]] = []
    each = [outcomes] * len(items) if isinstance(outcomes, BaseException) else outcomes
    for (_, future, key), outcome in zip(items, each, strict=True):
        if future is None:
            keys.append((key, outcome))
        elif future.done():
            continue
        elif outcome is None:
            future.set_result(None)
        elif isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.cancel()  # the worker itself is being cancelled
    if keys:
        assert told is not None, "acknowledge_soon needs `told`"
        told(keys)


class TakenAcks:
    """Acknowledgements taken from the batcher to ride along with a reserve.

    Several reserves may be on their way at once, each with its own share.
    """

    def __init__(self, items: list[Item], told: Told | None) -> None:
        self._items = items
        self._told = told

    @property
    def reservations(self) -> list[Reservation]:
        return [r for r, _, _ in self._items]

    def __bool__(self) -> bool:
        return bool(self._items)

    def settle(self, outcomes: Sequence[Exception | None] | BaseException) -> None:
        """Deliver the outcomes: one per item, or one error for them all."""
        items, self._items = self._items, []
        _deliver(items, outcomes, self._told)


class AckBatcher:
    """Collects `acknowledge` calls and sends them with `Queue.acknowledge_many`."""

    def __init__(
        self,
        queue: Queue,
        *,
        max_batch: int = MAX_BATCH,
        delay: float = 0.0,
        told: Told | None = None,
    ) -> None:
        self._queue = queue
        self._delay = delay
        """Seconds a batch waits to be taken by a reserve before it is sent on its own."""
        self._max_batch = max_batch
        self._waiting: list[Item] = []
        self._sender: asyncio.Task[None] | None = None
        self.told = told
        """Where the outcomes of `acknowledge_soon` go, a batch at a time."""

    async def acknowledge(self, reservation: Reservation) -> None:
        """Acknowledge `reservation` in the next batch; raises what its own settle raised."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[None] = loop.create_future()
        self._waiting.append((reservation, result, None))
        self._start_sender()
        await result

    def acknowledge_soon(self, reservation: Reservation, key: object) -> None:
        """Acknowledge `reservation` in the next batch; `told` gets `key` and the outcome."""
        self._waiting.append((reservation, None, key))
        sender = self._sender
        if sender is None or sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send())

    def _start_sender(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send())

    def take(self) -> TakenAcks:
        """Hand the waiting acknowledgements to the caller, who must `settle` them."""
        taken = TakenAcks(_live(self._waiting), self.told)
        self._waiting = []
        return taken

    async def _send(self) -> None:
        # Let jobs finishing on this loop turn join the batch (or, when the
        # worker's next reserve can carry it, give that reserve time to come).
        # Every batch waits again: jobs ending while one batch is on its way give the
        # next reserve its chance to carry them rather than following at once.
        while True:
            await asyncio.sleep(self._delay)
            if not self._waiting:
                return
            batch = self._waiting[: self._max_batch]
            del self._waiting[: self._max_batch]
            live = _live(batch)
            if not live:
                continue
            try:
                outcomes: (
                    Sequence[Exception | None] | BaseException
                ) = await self._queue.acknowledge_many([r for r, _, _ in live])
            except Exception as exc:
                outcomes = exc
            _deliver(live, outcomes, self.told)


def _live(items: list[Item]) -> list[Item]:
    """The items still waiting for an outcome (an awaiting caller may have been cancelled)."""
    return [item for item in items if item[1] is None or not item[1].done()]

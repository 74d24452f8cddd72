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
for its acknowledgement: it hands the batcher a callback instead of awaiting
a future (`acknowledge_soon`), which spares a future and a task switch per job.

A busy worker goes one step further: the loop that reserves the next batch
takes the waiting acknowledgements (`take`) and sends them with that
reserve (`Queue.acknowledge_and_reserve`), so a batch costs one round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ..queue import Queue, Reservation

MAX_BATCH = 256


class Callback:
    """Where `acknowledge_soon`'s outcome goes: a future's three endings, as one call.

    The callback gets None for a recorded acknowledgement, else the error
    (`asyncio.CancelledError` when the worker itself is being cancelled).
    """

    __slots__ = ("_done", "_then")

    def __init__(self, then: Callable[[BaseException | None], None]) -> None:
        self._then = then
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, _: None) -> None:
        if not self._done:  # `_finish`, written out: this is every plain success's way
            self._done = True
            self._then(None)

    def set_exception(self, error: BaseException) -> None:
        self._finish(error)

    def cancel(self) -> None:
        self._finish(asyncio.CancelledError())

    def _finish(self, outcome: BaseException | None) -> None:
        if not self._done:
            self._done = True
            self._then(outcome)


Sink = asyncio.Future[None] | Callback
"""What waits for one acknowledgement's outcome."""


class TakenAcks:
    """Acknowledgements taken from the batcher to ride along with a reserve.

    Several reserves may be on their way at once, each with its own share.
    """

    def __init__(self, items: list[tuple[Reservation, Sink]]) -> None:
        self._items = items

    @property
    def reservations(self) -> list[Reservation]:
        return [r for r, _ in self._items]

    def __bool__(self) -> bool:
        return bool(self._items)

    def settle(self, outcomes: Sequence[Exception | None] | BaseException) -> None:
        """Deliver the outcomes: one per item, or one error for them all."""
        for i, (_, future) in enumerate(self._items):
            if future.done():
                continue
            outcome = outcomes if isinstance(outcomes, BaseException) else outcomes[i]
            if outcome is None:
                future.set_result(None)
            elif isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.cancel()  # the worker itself is being cancelled
        self._items = []


class AckBatcher:
    """Collects `acknowledge` calls and sends them with `Queue.acknowledge_many`."""

    def __init__(self, queue: Queue, *, max_batch: int = MAX_BATCH, delay: float = 0.0) -> None:
        self._queue = queue
        self._delay = delay
        """Seconds a batch waits to be taken by a reserve before it is sent on its own."""
        self._max_batch = max_batch
        self._waiting: list[tuple[Reservation, Sink]] = []
        self._sender: asyncio.Task[None] | None = None

    async def acknowledge(self, reservation: Reservation) -> None:
        """Acknowledge `reservation` in the next batch; raises what its own settle raised."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[None] = loop.create_future()
        self._waiting.append((reservation, result))
        self._start_sender()
        await result

    def acknowledge_soon(
        self, reservation: Reservation, then: Callable[[BaseException | None], None]
    ) -> None:
        """Acknowledge `reservation` in the next batch; `then(outcome)` once it is known."""
        self._waiting.append((reservation, Callback(then)))
        self._start_sender()

    def _start_sender(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send())

    def take(self) -> TakenAcks:
        """Hand the waiting acknowledgements to the caller, who must `settle` them."""
        taken = TakenAcks([(r, f) for r, f in self._waiting if not f.done()])
        self._waiting.clear()
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
            live = [(r, f) for r, f in batch if not f.done()]
            if not live:
                continue
            try:
                outcomes = await self._queue.acknowledge_many([r for r, _ in live])
            except Exception as exc:
                for _, future in live:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), outcome in zip(live, outcomes, strict=True):
                if future.done():
                    continue
                if outcome is None:
                    future.set_result(None)
                else:
                    future.set_exception(outcome)

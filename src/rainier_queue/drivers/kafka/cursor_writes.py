# SPDX-License-Identifier: MIT
"""The cursor writes one event-loop turn makes go to the lock store together, in one trip.

Each job on Kafka costs two compare-and-sets of its partition's cursor in the
lock store (one when it is handed out, one when it is settled), and they were
the largest part of the worker's CPU per job: through redis-py's asyncio
client a command costs far more client CPU than the job's own work. They
come in rows: a reserve hands out the heads of several partitions side by
side, and a batch of acknowledgements settles a job of each partition side
by side, each in a task of its own that reaches its write in the same turn
of the event loop. So the writes asked for in one turn are sent at the end
of it as one batch (`ReplacesMany`: a pipeline on Redis), and each caller
gets its own answer. A batch is not a transaction: every write is the same
compare-and-set it was, answered on its own. Nothing waits for a batch
before it: batches of later turns go out while earlier ones are on their way.

A store that cannot batch (`ReplacesMany` absent) is asked one write at a
time, as before; so is a turn that asked for a single write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ...locks import Cache, ReplacesMany

Write = tuple[str, bytes, bytes]
"""(key, expected, new value): one compare-and-set."""


class CursorWrites:
    """`replace_if` for the cursors, batched per event-loop turn where the store allows."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._many = cache if isinstance(cache, ReplacesMany) else None
        self._turn: list[tuple[Write, asyncio.Future[bool]]] = []
        self._sending: set[asyncio.Task[None]] = set()
        """The batches on their way (a reference keeps each task alive)."""

    async def replace_if(self, key: str, expected: bytes, value: bytes) -> bool:
        """Set `key` to `value` if it holds `expected`; whether it did."""
        if self._many is None:
            return await self._cache.replace_if(key, expected, value)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._turn.append(((key, expected, value), answer))
        if len(self._turn) == 1:
            asyncio.get_running_loop().call_soon(self._end_of_turn)
        return await answer

    def _end_of_turn(self) -> None:
        turn, self._turn = self._turn, []
        task = asyncio.get_running_loop().create_task(self._send(turn))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, turn: Sequence[tuple[Write, asyncio.Future[bool]]]) -> None:
        try:
            if len(turn) == 1:
                (key, expected, value), _ = turn[0]
                answers = [await self._cache.replace_if(key, expected, value)]
            else:
                assert self._many is not None
                answers = await self._many.replace_many_if([write for write, _ in turn])
        except BaseException as error:  # every caller of the batch gets it
            for _, answer in turn:
                if answer.done():
                    continue
                if isinstance(error, Exception):
                    answer.set_exception(error)
                else:
                    answer.cancel()
            if not isinstance(error, Exception):
                raise
            return
        for (_, answer), result in zip(turn, answers, strict=True):
            if not answer.done():  # its caller may have been cancelled meanwhile
                answer.set_result(result)


__all__ = ["CursorWrites"]

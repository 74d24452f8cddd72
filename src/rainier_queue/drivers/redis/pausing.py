# SPDX-License-Identifier: MIT
"""Paused queues as one Redis set per namespace, `<prefix>{_}:paused`.

Every worker of the namespace reads the set on a cadence
(`WorkerOptions.pause_check`), never inside the reserve script, so the
reserve is the same script whether anything is paused or not, and a
namespace that never pauses pays nothing per job. One set, with the
namespace-wide keys' hash tag, so on a cluster it is one key on one slot
and one read answers for every queue a worker serves.

The set is kept like the jobs: a server without persistence that restarts
forgets its pauses with its jobs (`may_lose_accepted_job` says the same of
the jobs).
"""

from __future__ import annotations

from collections.abc import Sequence

from .connection import Calls, translated
from .keys import Keys


class RedisPauses:
    """`Pausable` for `RedisQueue`: SADD to pause, SREM to resume, SMEMBERS to look."""

    def __init__(self, calls: Calls, keys: Keys) -> None:
        self._ready = calls.ready
        self.key = keys.paused

    async def pause(self, queue: str) -> bool:
        async with translated("pause a queue"):
            return bool(await (await self._ready()).sadd(self.key, queue))

    async def resume(self, queue: str) -> bool:
        async with translated("resume a queue"):
            return bool(await (await self._ready()).srem(self.key, queue))

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        async with translated("read the paused queues"):
            marked = await (await self._ready()).smembers(self.key)
        return frozenset(q for q in queues if q in marked)


__all__ = ["RedisPauses"]

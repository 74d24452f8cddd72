# SPDX-License-Identifier: MIT
"""Where a paused queue's mark is kept, for drivers whose store is not a table or a key.

A pause is only worth having if every worker sees it, so the mark lives
where the connection's workers already meet: the database drivers keep a
table (`database/pausing.py`), Redis a set (`redis/pausing.py`), NATS a
key-value bucket (`nats/pausing.py`). Two drivers have no such place of
their own, and this module gives them one each:

- `LocalPauses`, a set in this process, for `memory://`, whose workers all
  live in this process anyway;
- `CachePauses`, one key per paused queue in a `Cache`, for Kafka, whose
  lock store every worker of a group already shares (its partition leases
  and cursors live there). A key with no expiry, so a pause lasts until
  someone resumes the queue; the store is the one `locks` names, so a lock
  store that loses its keys (a Redis without persistence that restarts)
  loses the pauses too, as it loses the leases.

Each is a part the queue holds and hands its `Pausable` calls to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ..locks import Cache


class LocalPauses:
    """Paused queue names in this process's memory."""

    def __init__(self) -> None:
        self._paused: set[str] = set()
        self._lock = threading.Lock()

    async def pause(self, queue: str) -> bool:
        with self._lock:
            if queue in self._paused:
                return False
            self._paused.add(queue)
            return True

    async def resume(self, queue: str) -> bool:
        with self._lock:
            if queue not in self._paused:
                return False
            self._paused.discard(queue)
            return True

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        with self._lock:
            return frozenset(q for q in queues if q in self._paused)


class CachePauses:
    """Paused queue names as keys in a shared `Cache`: a queue's key exists while it is paused."""

    MARK = b"paused"

    def __init__(self, cache: Cache, key: Callable[[str], str]) -> None:
        self._cache = cache
        self.key = key
        """The key that marks a queue paused."""

    async def pause(self, queue: str) -> bool:
        return await self._cache.add(self.key(queue), self.MARK)

    async def resume(self, queue: str) -> bool:
        return await self._cache.forget(self.key(queue))

    async def paused(self, queues: Sequence[str]) -> frozenset[str]:
        marks = [await self._cache.get(self.key(queue)) for queue in queues]
        return frozenset(q for q, mark in zip(queues, marks, strict=True) if mark is not None)


__all__ = ["CachePauses", "LocalPauses"]

# SPDX-License-Identifier: MIT
"""`MemoryRecords`: the record store of a driver that keeps everything in one process.

Why a module of its own: the memory driver's record store (worker
heartbeats, succeeded records, results) is a dict with expiry, an idea
apart from its lanes and leases, and it can be read and tested alone.
Expired records are dropped when they are next looked at, so no timer runs.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta


class MemoryRecords:
    """Keys to (value, monotonic expiry), behind a lock: the `RecordStore` of one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[bytes, float]] = {}

    def put(self, key: str, value: bytes, ttl: timedelta) -> None:
        with self._lock:
            self._items[key] = (value, time.monotonic() + ttl.total_seconds())

    def get(self, key: str) -> bytes | None:
        now = time.monotonic()
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if item[1] <= now:
                del self._items[key]
                return None
            return item[0]

    def forget(self, key: str) -> bool:
        with self._lock:
            return self._items.pop(key, None) is not None

    def matching(self, prefix: str) -> list[bytes]:
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (_, until) in self._items.items() if until <= now]:
                del self._items[key]
            return [value for key, (value, _) in self._items.items() if key.startswith(prefix)]


__all__ = ["MemoryRecords"]

# SPDX-License-Identifier: MIT
"""`MemoryCache`: the cache port in this process's memory.

For tests and single-process development. It is not shared: another
process sees none of its keys, so it says `is_shared = False`, and code
that needs locks across processes refuses it unless told otherwise with
`LockManager.declared_shared()`.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Self

from typing_extensions import override

from ..locks import Cache, parse_counter


class MemoryCache(Cache):
    """A dict with expiries behind a lock; every operation is atomic."""

    name = "memory"

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`memory://`; takes no options."""
        return cls()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, tuple[bytes, float | None]] = {}

    @property
    @override
    def is_shared(self) -> bool:
        return False

    def _live(self, key: str, now: float) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        value, expires = entry
        if expires is not None and expires <= now:
            del self._data[key]
            return None
        return value

    @staticmethod
    def _expiry(ttl: timedelta | None, now: float) -> float | None:
        return None if ttl is None else now + ttl.total_seconds()

    @override
    async def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._live(key, time.monotonic())

    @override
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        now = time.monotonic()
        with self._lock:
            self._data[key] = (bytes(value), self._expiry(ttl, now))

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        now = time.monotonic()
        with self._lock:
            if self._live(key, now) is not None:
                return False
            self._data[key] = (bytes(value), self._expiry(ttl, now))
            return True

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        now = time.monotonic()
        with self._lock:
            if self._live(key, now) != expected:
                return False
            self._data[key] = (bytes(value), self._expiry(ttl, now))
            return True

    @override
    async def forget(self, key: str) -> bool:
        with self._lock:
            return self._live(key, time.monotonic()) is not None and bool(self._data.pop(key, None))

    @override
    async def forget_if(self, key: str, expected: bytes) -> bool:
        with self._lock:
            if self._live(key, time.monotonic()) != expected:
                return False
            del self._data[key]
            return True

    @override
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        now = time.monotonic()
        with self._lock:
            current = self._live(key, now)
            if current is None:
                value, expires = by, self._expiry(ttl, now)
            else:
                value, expires = parse_counter(key, current) + by, self._data[key][1]
            self._data[key] = (str(value).encode(), expires)
            return value

    @override
    async def flush(self) -> None:
        with self._lock:
            self._data.clear()

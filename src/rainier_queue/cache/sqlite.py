# SPDX-License-Identifier: MIT
"""`SQLiteCache`: the cache port in a local SQLite file, shared by every process on it.

Unique jobs and the scheduler's "run on one server" lock need a store that
every worker process sees, and the embedded setup has no server to hold
one. The SQLite file the queue already uses does: this store keeps one
table (`{prefix}cache`: key, value, expiry) and can share the queue's file.

Each operation that reads and then writes runs inside one `BEGIN
IMMEDIATE`, which holds the file's write lock, so `add`, `replace_if`,
`forget_if` and `increment` are atomic across processes, not only across
this process's tasks. Expiry is wall-clock time, the only clock two
processes share; expired rows are ignored at once and swept now and then.

What it costs is what the SQLite queue costs: one writer at a time, one
machine.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Self, TypeVar

from typing_extensions import override

from .._clock import to_micros, utcnow
from ..drivers.database.schema import check_prefix
from ..drivers.database.sqlite.connection import SQLiteThread, resolve_file
from ..drivers.database.sqlite.settings import SQLiteSettings
from ..locks import Cache, parse_counter

T = TypeVar("T")

_SWEEP_EVERY = 1000
"""Writes between sweeps of expired rows, so keys nobody reads again do not pile up."""


class SQLiteCache(Cache):
    """Keys with expiries in one SQLite table; read-then-write operations under the write lock."""

    name = "sqlite"

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`sqlite:///relative.db` or `sqlite:////absolute.db`, with optional
        `?prefix=...&busy_timeout=...` in the query."""
        settings, _ = SQLiteSettings.read(url, who="the sqlite cache")
        return cls(settings.path, prefix=settings.prefix, busy_timeout=settings.busy_timeout)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str = "rainier_",
        busy_timeout: timedelta | None = None,
    ) -> None:
        self._table = f"{check_prefix(prefix)}cache"
        self.path = resolve_file(path)
        self._thread = SQLiteThread(
            self.path, busy_timeout=busy_timeout or timedelta(seconds=5), pragmas={}
        )
        self._created = False
        self._writes = 0

    @property
    @override
    def is_shared(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<SQLiteCache sqlite {self.path} (table {self._table})>"

    async def _write(self, fn: Callable[[sqlite3.Connection, int], T]) -> T:
        """Run `fn(connection, now)` inside `BEGIN IMMEDIATE` on the connection's thread."""

        def on_thread(conn: sqlite3.Connection) -> T:
            if not self._created:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._table} (key TEXT PRIMARY KEY, "
                    "value BLOB NOT NULL, expires_at INTEGER)"
                )
                self._created = True
            now = _now()
            self._writes += 1
            if self._writes % _SWEEP_EVERY == 0:
                conn.execute(f"DELETE FROM {self._table} WHERE expires_at <= ?", (now,))
            return fn(conn, now)

        return await self._thread.transaction(on_thread)

    def _live(
        self, conn: sqlite3.Connection, key: str, now: int
    ) -> tuple[bytes, int | None] | None:
        row = conn.execute(
            f"SELECT value, expires_at FROM {self._table} WHERE key = ?", (key,)
        ).fetchone()
        if row is None or (row[1] is not None and row[1] <= now):
            return None
        return bytes(row[0]), row[1]

    def _set(
        self, conn: sqlite3.Connection, key: str, value: bytes, expires_at: int | None
    ) -> None:
        conn.execute(
            f"INSERT INTO {self._table} (key, value, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "expires_at = excluded.expires_at",
            (key, bytes(value), expires_at),
        )

    @override
    async def get(self, key: str) -> bytes | None:
        if self._created:  # a plain read: WAL readers never wait for a writer
            found = await self._thread.call(lambda conn: self._live(conn, key, _now()))
        else:  # the first call creates the table, which needs the write path
            found = await self._write(lambda conn, now: self._live(conn, key, now))
        return None if found is None else found[0]

    @override
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        await self._write(lambda conn, now: self._set(conn, key, value, _expiry(ttl, now)))

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        def add(conn: sqlite3.Connection, now: int) -> bool:
            if self._live(conn, key, now) is not None:
                return False
            self._set(conn, key, value, _expiry(ttl, now))
            return True

        return await self._write(add)

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        def replace(conn: sqlite3.Connection, now: int) -> bool:
            found = self._live(conn, key, now)
            if found is None or found[0] != expected:
                return False
            self._set(conn, key, value, _expiry(ttl, now))
            return True

        return await self._write(replace)

    @override
    async def forget(self, key: str) -> bool:
        def forget(conn: sqlite3.Connection, now: int) -> bool:
            live = self._live(conn, key, now) is not None
            conn.execute(f"DELETE FROM {self._table} WHERE key = ?", (key,))
            return live

        return await self._write(forget)

    @override
    async def forget_if(self, key: str, expected: bytes) -> bool:
        def forget_if(conn: sqlite3.Connection, now: int) -> bool:
            found = self._live(conn, key, now)
            if found is None or found[0] != expected:
                return False
            conn.execute(f"DELETE FROM {self._table} WHERE key = ?", (key,))
            return True

        return await self._write(forget_if)

    @override
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        def increment(conn: sqlite3.Connection, now: int) -> int:
            found = self._live(conn, key, now)
            if found is None:
                value, expires = by, _expiry(ttl, now)
            else:
                value, expires = parse_counter(key, found[0]) + by, found[1]
            self._set(conn, key, str(value).encode(), expires)
            return value

        return await self._write(increment)

    @override
    async def flush(self) -> None:
        def flush(conn: sqlite3.Connection, now: int) -> None:
            conn.execute(f"DELETE FROM {self._table}")

        await self._write(flush)

    @override
    async def aclose(self) -> None:
        await self._thread.aclose()


def _now() -> int:
    return to_micros(utcnow())


def _expiry(ttl: timedelta | None, now: int) -> int | None:
    return None if ttl is None else now + ttl // timedelta(microseconds=1)

# SPDX-License-Identifier: MIT
"""`MySQLCache`: the cache port in a MySQL or MariaDB table, shared by every process on it.

Unique jobs and the scheduler's "run on one server" lock need a store that
every worker sees. An application whose queue lives in MySQL already has
one: this store keeps one table (`{prefix}cache`: key, value, expiry) in
the same database, through the same kind of pool and the same error
translation as `MySQLQueue`.

Each operation is one statement or one short transaction whose writes are
fenced in SQL, never read into Python and written back unlocked:

- `add` deletes an expired row and inserts; the primary key makes a second
  concurrent insert fail, which is the "someone else has it" answer;
- `replace_if` and `forget_if` name the expected value (and that it has not
  expired) in their WHERE clause;
- `increment` reads the counter `FOR UPDATE`, so two increments queue up
  on the row instead of both reading the same number.

Expiry is the server's clock, which every process on it shares; expired
rows are ignored at once and swept now and then. What it costs: a round
trip (or two) per operation, and the server's commit rate, which is far
below Redis's; locks and uniqueness keys need only a few per job.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Self

from typing_extensions import override

from ..drivers.database.mysql.address import ClientTLS, ServerAddress
from ..drivers.database.mysql.connection import NOW_US, MySQLPool, Session
from ..drivers.database.mysql.settings import MySQLSettings
from ..drivers.database.schema import check_prefix
from ..locks import Cache

_SWEEP_EVERY = 1000
"""Writes between sweeps of expired rows, so keys nobody reads again do not pile up."""

_LIVE = f"(expires_at IS NULL OR expires_at > {NOW_US})"
_EXPIRES = f"{NOW_US} + %s"
"""The expiry for a TTL in microseconds; NULL (never) when the TTL is NULL."""


class MySQLCache(Cache):
    """Keys with expiries in one InnoDB table; every conditional write fenced in SQL."""

    name = "mysql"

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`mysql://user:password@host:3306/database`, with optional `?prefix=...`,
        `pool_min`, `pool_max`, `connect_timeout` and the TLS options (`ssl`,
        `ssl_ca`, `ssl_cert`, `ssl_key`, `insecure_skip_verify`) in the query."""
        settings, _ = MySQLSettings.read(url, who="the mysql cache")
        return cls(settings.url, **settings.keywords())

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "rainier_",
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: timedelta = timedelta(seconds=10),
        tls: ClientTLS | None = None,
    ) -> None:
        self._table = t = f"{check_prefix(prefix)}cache"
        address, _ = ServerAddress.from_url(url, what="the mysql cache")
        self._pool = MySQLPool(
            address,
            pool_min=pool_min,
            pool_max=pool_max,
            connect_timeout=connect_timeout,
            client_tls=tls,
        )
        self._created = False
        self._writes = 0
        self._get = f"SELECT cache_value FROM {t} WHERE cache_key = %s AND {_LIVE}"
        self._insert = (
            f"INSERT INTO {t} (cache_key, cache_value, expires_at) "
            f"VALUES (%s, UNHEX(%s), {_EXPIRES})"
        )
        self._upsert = (
            f"{self._insert} "
            f"ON DUPLICATE KEY UPDATE cache_value = UNHEX(%s), expires_at = {_EXPIRES}"
        )
        self._drop_expired = f"DELETE FROM {t} WHERE cache_key = %s AND NOT {_LIVE}"
        self._replace = (
            f"UPDATE {t} SET cache_value = UNHEX(%s), expires_at = {_EXPIRES} "
            f"WHERE cache_key = %s AND cache_value = UNHEX(%s) AND {_LIVE}"
        )
        self._forget_live = f"DELETE FROM {t} WHERE cache_key = %s AND {_LIVE}"
        self._forget_any = f"DELETE FROM {t} WHERE cache_key = %s"
        self._forget_if = (
            f"DELETE FROM {t} WHERE cache_key = %s AND cache_value = UNHEX(%s) AND {_LIVE}"
        )
        self._lock_counter = f"SELECT cache_value, {_LIVE} FROM {t} WHERE cache_key = %s FOR UPDATE"
        self._set_counter = f"UPDATE {t} SET cache_value = UNHEX(%s) WHERE cache_key = %s"
        self._restart_counter = (
            f"UPDATE {t} SET cache_value = UNHEX(%s), expires_at = {_EXPIRES} WHERE cache_key = %s"
        )

    @property
    @override
    def is_shared(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<MySQLCache mysql {self._pool.address.describe()} (table {self._table})>"

    async def _ready(self) -> None:
        if self._created:
            return

        async def create(s: Session) -> None:
            await s.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                "cache_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL "
                "PRIMARY KEY, cache_value LONGBLOB NOT NULL, expires_at BIGINT NULL"
                ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
            )

        await self._pool.run(create)
        self._created = True

    async def _wrote(self, s: Session) -> None:
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            await s.execute(f"DELETE FROM {self._table} WHERE NOT {_LIVE}")

    @override
    async def get(self, key: str) -> bytes | None:
        await self._ready()
        rows = await self._pool.run(lambda s: s.fetchall(self._get, (key,)))
        return bytes(rows[0][0]) if rows else None

    @override
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        await self._ready()
        micros = _micros(ttl)

        async def put(s: Session) -> None:
            await s.execute(self._upsert, (key, _hex(value), micros, _hex(value), micros))
            await self._wrote(s)

        await self._pool.run(put)

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        await self._ready()

        async def add(s: Session) -> bool:
            await s.execute(self._drop_expired, (key,))
            added = await s.insert_new(self._insert, (key, _hex(value), _micros(ttl)))
            await self._wrote(s)
            return added

        return await self._pool.run(add)

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        await self._ready()
        params = (_hex(value), _micros(ttl), key, _hex(expected))
        return await self._pool.run(lambda s: s.execute(self._replace, params)) > 0

    @override
    async def forget(self, key: str) -> bool:
        await self._ready()

        async def forget(s: Session) -> bool:
            live = await s.execute(self._forget_live, (key,)) > 0
            await s.execute(self._forget_any, (key,))  # an expired leftover, if any
            return live

        return await self._pool.run(forget)

    @override
    async def forget_if(self, key: str, expected: bytes) -> bool:
        await self._ready()
        params = (key, _hex(expected))
        return await self._pool.run(lambda s: s.execute(self._forget_if, params)) > 0

    @override
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        await self._ready()

        async def increment(s: Session) -> int:
            while True:
                rows = await s.fetchall(self._lock_counter, (key,))
                if rows and rows[0][1]:
                    value = _as_int(key, bytes(rows[0][0])) + by
                    await s.execute(self._set_counter, (_hex(str(value).encode()), key))
                    return value
                if rows:  # expired: start over, with this call's TTL
                    await s.execute(
                        self._restart_counter, (_hex(str(by).encode()), _micros(ttl), key)
                    )
                    return by
                if await s.insert_new(self._insert, (key, _hex(str(by).encode()), _micros(ttl))):
                    await self._wrote(s)
                    return by
                # Another call created it between our read and our insert: lock it and add.

        return await self._pool.run(increment)

    @override
    async def flush(self) -> None:
        await self._ready()
        await self._pool.run(lambda s: s.execute(f"DELETE FROM {self._table}"))

    @override
    async def aclose(self) -> None:
        await self._pool.aclose()


def _hex(value: bytes) -> str:
    # Bytes go over the wire as hex for UNHEX(): aiomysql 0.3.2 cannot escape
    # a bytes parameter with PyMySQL 1.2 (it imports a helper PyMySQL removed).
    return bytes(value).hex()


def _micros(ttl: timedelta | None) -> int | None:
    return None if ttl is None else ttl // timedelta(microseconds=1)


def _as_int(key: str, raw: bytes) -> int:
    try:
        return int(raw.decode() or "0")
    except (UnicodeDecodeError, ValueError):
        raise ValueError(
            f"cache key {key!r} holds {raw[:20]!r}, which is not a whole number"
        ) from None


__all__ = ["MySQLCache"]

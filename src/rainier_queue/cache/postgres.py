# SPDX-License-Identifier: MIT
"""`PostgresCache`: the cache port in one PostgreSQL table, shared by every worker.

Unique jobs and the scheduler's "run on one server" lock need a store that
every worker on every machine sees; an application on the PostgreSQL
queue already has one. This store keeps one table (`{prefix}cache`: key,
value, expiry in microseconds on the server's clock) beside the queue's.

Each operation is one statement, so it is atomic without a transaction of
its own or a lock held across a round trip: `add` is an `INSERT ... ON
CONFLICT DO UPDATE ... WHERE` the old row has expired; `replace_if`,
`forget_if` match on the value they expect; `increment` adds inside the
`ON CONFLICT` clause. Expiry is read from the server's clock, so processes
whose clocks disagree still agree on when a lock lapses.

What it costs: every lock operation is a write on a table with heavy
churn (autovacuum must keep up), and a round trip to the server; a
Redis store is faster where one is running. Expired rows are ignored at
once and swept now and then.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Self

import psycopg
import psycopg.errors
from typing_extensions import override

from ..drivers.database.postgres.connection import (
    DEFAULT_POOL_TIMEOUT,
    NOW_US,
    Pool,
    PoolSettings,
    describe_dsn,
    split_url,
)
from ..drivers.database.postgres.settings import PostgresSettings
from ..drivers.database.schema import Tables
from ..locks import Cache

_SWEEP_EVERY = 1000
"""Writes between sweeps of expired rows, so keys nobody reads again do not pile up."""


_NOT_A_NUMBER = (
    psycopg.errors.InvalidTextRepresentation,
    psycopg.errors.CharacterNotInRepertoire,
    psycopg.errors.NumericValueOutOfRange,
    psycopg.errors.UntranslatableCharacter,
)


class PostgresCache(Cache):
    """Keys with expiries in one PostgreSQL table; every operation a single statement."""

    name = "postgres"

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`postgresql://user@host/db`, with optional `prefix`, `schema`, `pool_min`,
        `pool_max`, `pool_timeout` and `prepared_statements` in the query (the rest
        goes to libpq)."""
        settings, _ = PostgresSettings.read(url, who="the postgres cache")
        return cls(settings.dsn, **settings.keywords())

    def __init__(
        self,
        dsn: str,
        *,
        prefix: str = "rainier_",
        schema: str | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        pool_timeout: timedelta = DEFAULT_POOL_TIMEOUT,
        prepared_statements: bool = True,
        insecure_skip_verify: bool = False,
    ) -> None:
        tables = Tables.for_prefix(prefix, schema)
        self._schema = tables.schema
        self._table = t = tables.qualified(f"{tables.prefix}cache")
        clean, _ = split_url(dsn, frozenset(), insecure=insecure_skip_verify)
        self._where = describe_dsn(clean)
        self._pool = Pool(
            clean,
            PoolSettings(
                min_size=pool_min,
                max_size=pool_max,
                timeout=pool_timeout,
                prepared_statements=prepared_statements,
            ),
            name="rainier-cache",
        )
        self._created = False
        self._writes = 0
        live = f"({t}.expires_at IS NULL OR {t}.expires_at > {NOW_US})"
        expiry = f"{NOW_US} + %s::bigint"
        self._get = f"SELECT value FROM {t} WHERE key = %s AND {live}"
        self._put = (
            f"INSERT INTO {t} (key, value, expires_at) VALUES (%s, %s, {expiry}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "expires_at = excluded.expires_at"
        )
        self._add = f"{self._put} WHERE NOT {live} RETURNING 1"
        self._replace_if = (
            f"UPDATE {t} SET value = %s, expires_at = {expiry} "
            f"WHERE key = %s AND value = %s AND {live}"
        )
        self._forget = f"DELETE FROM {t} WHERE key = %s RETURNING {live}"
        self._forget_if = f"DELETE FROM {t} WHERE key = %s AND value = %s AND {live}"
        number = f"COALESCE(NULLIF(btrim(convert_from({t}.value, 'UTF8')), ''), '0')::bigint"
        self._increment = (
            f"INSERT INTO {t} (key, value, expires_at) "
            f"VALUES (%s, convert_to(%s::bigint::text, 'UTF8'), {expiry}) "
            "ON CONFLICT (key) DO UPDATE SET "
            f"value = CASE WHEN {live} THEN convert_to(({number} + %s::bigint)::text, 'UTF8') "
            "ELSE excluded.value END, "
            f"expires_at = CASE WHEN {live} THEN {t}.expires_at ELSE excluded.expires_at END "
            "RETURNING convert_from(value, 'UTF8')"
        )
        self._sweep = f"DELETE FROM {t} WHERE expires_at <= {NOW_US}"

    @property
    @override
    def is_shared(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<PostgresCache {self._where} (table {self._table})>"

    async def _execute(self, statement: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """Run one statement on a pooled connection; its rows (none for a plain write)."""
        async with self._pool.connection() as conn:
            if not self._created:
                await self._create(conn)
            cur = await conn.execute(statement, params)
            rows = await cur.fetchall() if cur.description is not None else []
            if statement != self._get:
                self._writes += 1
                if self._writes % _SWEEP_EVERY == 0:
                    await conn.execute(self._sweep)
            return rows

    async def _create(self, conn: psycopg.AsyncConnection[Any]) -> None:
        # Two processes creating the table at once would race on the catalog,
        # so the creation runs under an advisory lock.
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rainier_cache {self._table}",)
            )
            if self._schema:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self._schema}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} (key TEXT PRIMARY KEY, "
                "value BYTEA NOT NULL, expires_at BIGINT)"
            )
        self._created = True

    @override
    async def get(self, key: str) -> bytes | None:
        rows = await self._execute(self._get, (key,))
        return bytes(rows[0][0]) if rows else None

    @override
    async def put(self, key: str, value: bytes, ttl: timedelta | None = None) -> None:
        await self._execute(self._put, (key, bytes(value), _micros(ttl)))

    @override
    async def add(self, key: str, value: bytes, ttl: timedelta | None = None) -> bool:
        return bool(await self._execute(self._add, (key, bytes(value), _micros(ttl))))

    @override
    async def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl: timedelta | None = None
    ) -> bool:
        params = (bytes(value), _micros(ttl), key, bytes(expected))
        async with self._pool.connection() as conn:
            if not self._created:
                await self._create(conn)
            cur = await conn.execute(self._replace_if, params)
            return cur.rowcount > 0

    @override
    async def forget(self, key: str) -> bool:
        rows = await self._execute(self._forget, (key,))
        return bool(rows and rows[0][0])

    @override
    async def forget_if(self, key: str, expected: bytes) -> bool:
        async with self._pool.connection() as conn:
            if not self._created:
                await self._create(conn)
            cur = await conn.execute(self._forget_if, (key, bytes(expected)))
            return cur.rowcount > 0

    @override
    async def increment(self, key: str, by: int = 1, ttl: timedelta | None = None) -> int:
        try:
            # Caught before `Pool.connection` translates it: a value that is
            # not a number is the caller's mistake, not the server's refusal.
            async with self._pool.connection() as conn:
                if not self._created:
                    await self._create(conn)
                try:
                    cur = await conn.execute(self._increment, (key, by, _micros(ttl), by))
                except _NOT_A_NUMBER:
                    raise _NotANumber from None
                row = await cur.fetchone()
        except _NotANumber:
            found = await self.get(key)
            raise ValueError(
                f"cache key {key!r} holds {(found or b'')[:20]!r}, which is not a whole number"
            ) from None
        assert row is not None
        return int(row[0])

    @override
    async def flush(self) -> None:
        await self._execute(f"DELETE FROM {self._table}", ())

    @override
    async def aclose(self) -> None:
        await self._pool.aclose()


class _NotANumber(Exception):
    """Carries a cast failure in `increment` past the pool's translation."""


def _micros(ttl: timedelta | None) -> int | None:
    return None if ttl is None else ttl // timedelta(microseconds=1)


__all__ = ["PostgresCache"]

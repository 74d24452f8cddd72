# SPDX-License-Identifier: MIT
"""Where the tests' PostgreSQL is, and how a test's namespace (a table prefix) is removed."""

from __future__ import annotations

import os

import psycopg
from psycopg import sql

from .services import require_port

PG_URL = os.environ.get("RAINIER_QUEUE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def require_postgres() -> None:
    """Skip (or fail, where services are required) unless PostgreSQL answers."""
    require_port("PostgreSQL", 5432)


async def drop_prefixed(prefix: str, schema: str = "public") -> None:
    """Drop every table whose name starts with `prefix` in `schema`."""
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        rows = await (
            await conn.execute(
                "SELECT tablename FROM pg_tables "
                "WHERE schemaname = %s AND starts_with(tablename, %s)",
                (schema, prefix),
            )
        ).fetchall()
        for (name,) in rows:
            await conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(schema, name))
            )

# SPDX-License-Identifier: MIT
"""The MariaDB/MySQL server the tests use, and how to drop what a test left there."""

from __future__ import annotations

import aiomysql  # type: ignore[import-untyped]

from .services import require_port

HOST = "127.0.0.1"
PORT = 3306
SERVER = f"mysql://root@{HOST}:{PORT}/test"

QUEUE_TABLES = ("jobs", "failed_jobs", "schema_version")


def check() -> None:
    """Skip (or fail, where services are required) unless MariaDB answers."""
    require_port("MariaDB", PORT, HOST)


async def drop_tables(prefix: str, names: tuple[str, ...] = (*QUEUE_TABLES, "cache")) -> None:
    """Drop the tables under `prefix` (a checked identifier, so safe to splice into SQL)."""
    conn = await aiomysql.connect(host=HOST, port=PORT, user="root", db="test", autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute("SET SESSION sql_notes = 0")  # "unknown table" is no news
            tables = ", ".join(f"`{prefix}{name}`" for name in names)
            await cur.execute(f"DROP TABLE IF EXISTS {tables}")
    finally:
        conn.close()

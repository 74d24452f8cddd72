# SPDX-License-Identifier: MIT
"""The application's own database connection, in a transaction, for each SQL store.

Transactional enqueue and the outbox both write with a connection the
application opened, not the queue's; the contract suite and the outbox
tests open one here per store, the way an application would, and commit
or roll back on it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomysql  # type: ignore[import-untyped]
import psycopg

from .mysql_service import HOST, PORT
from .postgres import PG_URL


@dataclass
class AppTransaction:
    """An open transaction on the application's connection (`connection`)."""

    connection: Any
    kind: str

    async def commit(self) -> None:
        if self.kind == "mysql" or self.kind == "postgres":
            await self.connection.commit()
        else:
            self.connection.commit()

    async def rollback(self) -> None:
        if self.kind == "sqlite":
            self.connection.rollback()
        else:
            await self.connection.rollback()

    async def close(self) -> None:
        if self.kind == "mysql":
            self.connection.close()
        elif self.kind == "postgres":
            await self.connection.close()
        else:
            self.connection.close()


async def postgres_transaction() -> AppTransaction:
    """A psycopg connection, not in autocommit: its first statement opens a transaction."""
    return AppTransaction(await psycopg.AsyncConnection.connect(PG_URL), "postgres")


async def mysql_transaction() -> AppTransaction:
    """An aiomysql connection to the test database, a transaction begun on it."""
    conn = await aiomysql.connect(
        host=HOST, port=PORT, user="root", db="test", autocommit=False, charset="utf8mb4"
    )
    await conn.begin()
    return AppTransaction(conn, "mysql")


async def sqlite_transaction(path: Path) -> AppTransaction:
    """Python's sqlite3 on `path`, as an application opens it (a transaction at the first
    write), with a wait for the queue's write lock as long as a loaded machine needs."""
    return AppTransaction(sqlite3.connect(path, timeout=30), "sqlite")

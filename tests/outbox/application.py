# SPDX-License-Identifier: MIT
"""The application the outbox tests kill: orders written and jobs dispatched in one
transaction each, every third one rolled back, until it is killed.

Run as `python -m tests.outbox.application KIND CONFIG TABLE`: KIND is the SQL store
(postgres, mysql, sqlite), CONFIG the rainier-queue.toml whose default connection has
an outbox, TABLE the application's own orders table. It prints `committed N` after
each commit, so the test knows when to kill it; what it committed is what the
orders table holds, which is the truth the test holds the target to.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rainier_queue.connections import QueueConfig
from rainier_queue.context import JobContext
from rainier_queue.job import Job

from ..app_transactions import (
    AppTransaction,
    mysql_transaction,
    postgres_transaction,
    sqlite_transaction,
)


class Placed(Job):
    """The job an order's commit must bring about."""

    name = "placed"
    order: int

    def handle(self, ctx: JobContext) -> None:
        return None


async def open_app(kind: str, sqlite_file: Path | None) -> AppTransaction:
    if kind == "postgres":
        return await postgres_transaction()
    if kind == "mysql":
        return await mysql_transaction()
    assert sqlite_file is not None
    return await sqlite_transaction(sqlite_file)


async def execute(app: AppTransaction, sql: str, params: tuple[object, ...] = ()) -> None:
    if app.kind == "sqlite":
        app.connection.execute(sql.replace("%s", "?"), params)
    elif app.kind == "mysql":
        async with app.connection.cursor() as cur:
            await cur.execute(sql, params or None)
    else:
        await app.connection.execute(sql, params)


async def main(kind: str, config_path: str, table: str) -> None:
    config = QueueConfig.load(config_path)
    assert config is not None
    manager = config.build()
    sqlite_file = Path(config_path).parent / "queue.db"
    app = await open_app(kind, sqlite_file)
    order = 0
    while True:
        order += 1
        await execute(app, f"INSERT INTO {table} (n) VALUES (%s)", (order,))
        await manager.dispatch_in(app.connection, Placed(order=order))
        if order % 3 == 0:
            await app.rollback()
        else:
            await app.commit()
            print(f"committed {order}", flush=True)
        if app.kind == "mysql":
            await app.connection.begin()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

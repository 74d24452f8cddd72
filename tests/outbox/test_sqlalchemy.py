# SPDX-License-Identifier: MIT
"""The outbox from an application on SQLAlchemy: its session or connection is handed to
`dispatch_in` as it is, and the outbox row commits and rolls back with the application's
own rows. PostgreSQL through psycopg and MySQL through aiomysql (SQLAlchemy's asyncio
sessions), SQLite through sqlite3 (a blocking session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from ..mysql_service import HOST, PORT
from .application import Placed
from .harness import Setup, arrived, committed_orders, outbox_setup

ASYNC_URLS = {
    "postgres": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mysql": f"mysql+aiomysql://root@{HOST}:{PORT}/test",
}


async def _relayed(setup: Setup) -> dict[int, int]:
    from rainier_queue.outbox import Relay

    outbox, target = setup.outbox(), setup.target_queue()
    try:
        await Relay(outbox, target).drain()
    finally:
        await outbox.aclose()
        await target.aclose()
    return dict(await arrived(setup, await committed_orders(setup)))


@pytest.mark.parametrize("store", ["postgres", "mysql"])
async def test_an_async_session_commits_and_rolls_back_the_outbox_row_with_its_own(
    store: str, tmp_path: Path
) -> None:
    async with outbox_setup(store, "redis", tmp_path) as setup:
        manager = setup.open_config().build()
        engine = create_async_engine(ASYNC_URLS[store])
        insert = text(f"INSERT INTO {setup.table} (n) VALUES (:n)")
        try:
            async with AsyncSession(engine) as session, session.begin():
                await session.execute(insert, {"n": 1})
                await manager.dispatch_in(session, Placed(order=1))
            async with AsyncSession(engine) as session:
                await session.execute(insert, {"n": 2})
                await manager.dispatch_in(session, Placed(order=2))
                await session.rollback()
            async with engine.begin() as connection:  # an AsyncConnection does as well
                await connection.execute(insert, {"n": 3})
                await manager.dispatch_in(connection, Placed(order=3))
        finally:
            await engine.dispose()
            await manager.aclose()

        assert await _relayed(setup) == {1: 1, 3: 1}


async def test_a_blocking_session_on_sqlite_commits_and_rolls_back_the_outbox_row(
    tmp_path: Path,
) -> None:
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        engine = create_engine(f"sqlite:///{tmp_path / 'queue.db'}")
        insert = text(f"INSERT INTO {setup.table} (n) VALUES (:n)")
        try:
            with Session(engine) as session:
                session.execute(insert, {"n": 1})
                outbox.dispatch_in_sync(session, Placed(order=1))
                session.commit()
            with Session(engine) as session:
                session.execute(insert, {"n": 2})
                await outbox.dispatch_in(session, Placed(order=2))
                session.rollback()
        finally:
            engine.dispose()
            await outbox.aclose()

        assert await _relayed(setup) == {1: 1}

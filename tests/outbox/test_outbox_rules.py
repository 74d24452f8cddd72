# SPDX-License-Identifier: MIT
"""What the outbox refuses, and what its relay does when a target is down or a row is not
one of its own: on SQLite (the application's file) feeding Redis, the real services."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rainier_queue.connections import QueueConfig, open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable, ConfigurationError
from rainier_queue.manager import QueueManager
from rainier_queue.outbox import Outbox, Relay, carried
from rainier_queue.queue import FailedJobStore, TransactionalEnqueue

from ..contract.backends import BACKENDS
from .application import Placed
from .harness import arrived, outbox_setup


async def test_a_connection_that_cannot_join_the_transaction_needs_an_outbox(
    tmp_path: Path,
) -> None:
    BACKENDS["redis"].check()  # type: ignore[misc]
    manager = QueueManager(open_queue(BACKENDS["redis"].url(tmp_path, "rqnooutbox")))
    try:
        with (
            sqlite3.connect(tmp_path / "app.db") as conn,
            pytest.raises(ConfigurationError, match="outbox"),
        ):
            await manager.dispatch_in(conn, Placed(order=1))
    finally:
        await manager.aclose()


async def test_an_outbox_must_live_where_the_application_commits(tmp_path: Path) -> None:
    store = open_queue("memory://")
    with pytest.raises(ConfigurationError, match="PostgreSQL, MySQL/MariaDB or SQLite"):
        Outbox(store, target="default")
    await store.aclose()


def test_an_outbox_that_is_no_url_is_refused_when_the_config_is_read() -> None:
    with pytest.raises(ConfigurationError, match="`outbox` must be the URL"):
        QueueConfig.from_mapping({"connections": {"main": {"url": "memory://", "outbox": 5}}})


async def test_the_outbox_refuses_a_sqlite_connection_to_another_file(tmp_path: Path) -> None:
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        try:
            with (
                sqlite3.connect(tmp_path / "elsewhere.db") as other,
                pytest.raises(ConfigurationError, match="queue's file"),
            ):
                await outbox.dispatch_in(other, Placed(order=1))
        finally:
            await outbox.aclose()


async def test_the_relay_keeps_the_rows_while_the_target_is_down_and_sends_them_after(
    tmp_path: Path,
) -> None:
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        app = await setup.app()
        await outbox.dispatch_many_in(app.connection, [Placed(order=n) for n in (1, 2)])
        await app.commit()
        await app.close()
        down = open_queue(BACKENDS["redis"].unreachable_url(tmp_path, setup.namespace))  # type: ignore[misc]
        try:
            with pytest.raises(BrokerUnavailable):
                await Relay(outbox, down).relay_batch(wait=False)
            assert await outbox.pending() == 2, "handed back at once, for the next try"

            target = setup.target_queue()
            assert await Relay(outbox, target).drain() == 2
            await target.aclose()
        finally:
            await down.aclose()
            await outbox.aclose()
        assert set(await arrived(setup, {1, 2})) == {1, 2}


async def test_a_row_that_is_not_an_outbox_row_is_set_aside_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        store = outbox.store
        assert isinstance(store, TransactionalEnqueue)
        app = await setup.app()
        stranger = QueuedJob.create("written-by-hand", {"order": 99}, queue="default")
        await store.push_in(app.connection, stranger)
        await outbox.dispatch_in(app.connection, Placed(order=1))
        await app.commit()
        await app.close()
        target = setup.target_queue()
        try:
            assert await Relay(outbox, target).drain() == 2
        finally:
            await target.aclose()
        assert isinstance(store, FailedJobStore)
        [failed] = await store.failed_jobs()
        assert failed.job.id == stranger.id
        assert "not an outbox row" in failed.error
        assert "written-by-hand" in failed.error
        await outbox.aclose()
        assert set(await arrived(setup, {1})) == {1}


async def test_a_sql_connection_without_an_outbox_takes_the_job_in_the_transaction_itself(
    tmp_path: Path,
) -> None:
    manager = QueueManager(open_queue(f"sqlite:///{tmp_path / 'app.db'}"))
    try:
        await manager.queue.size("default")  # its tables first, as provision makes them
        with sqlite3.connect(tmp_path / "app.db") as conn:  # committed on leaving
            kept = await manager.dispatch_in(conn, Placed(order=1))
        conn = sqlite3.connect(tmp_path / "app.db")
        await manager.dispatch_in(conn, Placed(order=2))
        conn.rollback()
        conn.close()

        [got] = await manager.queue.reserve("default", limit=5)
        assert (got.job.id, got.job.payload) == (kept, {"order": 1})
    finally:
        await manager.aclose()


@pytest.mark.parametrize("target", ["postgres", "mysql", "sqlite"])
async def test_a_sql_target_that_holds_the_job_already_takes_the_row_as_delivered(
    target: str, tmp_path: Path
) -> None:
    async with outbox_setup(
        "sqlite" if target != "sqlite" else "postgres", target, tmp_path
    ) as setup:
        outbox = setup.outbox()
        app = await setup.app()
        first = await outbox.dispatch_in(app.connection, Placed(order=1))
        await outbox.dispatch_in(app.connection, Placed(order=2))
        await app.commit()
        await app.close()
        landing = setup.target_queue()
        try:
            # A relay that died after its push and before the delete left this behind.
            for row in await outbox.store.reserve("default", limit=5):
                if row.job.id == first:
                    await landing.push(carried(row.job))
                await outbox.store.release(row, count_attempt=False)

            relay = Relay(outbox, landing)
            assert await relay.drain() == 2
            assert relay.counts.duplicates == 1
            assert relay.counts.refused == 0
        finally:
            await landing.aclose()
            await outbox.aclose()
        assert dict(await arrived(setup, {1, 2})) == {1: 1, 2: 1}

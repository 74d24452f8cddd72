# SPDX-License-Identifier: MIT
"""`rainier-queue provision` makes the outbox, `rainier-queue relay --drain` empties it,
and the blocking path (`dispatch_in_sync`) writes in the application's blocking
connection: psycopg on PostgreSQL, sqlite3 on SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from ..cli.harness import run
from ..postgres import PG_URL
from .application import Placed
from .harness import arrived, outbox_setup


def test_relay_says_so_when_no_connection_has_an_outbox(tmp_path: Path) -> None:
    result = run("--url", f"sqlite:///{tmp_path / 'jobs.db'}", "relay", "--drain")

    assert result.code != 0
    assert "no connection here has an outbox" in result.output
    assert "Traceback" not in result.output


async def test_provision_makes_the_outbox_and_relay_drain_empties_it(tmp_path: Path) -> None:
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        provisioned = run("--config", str(setup.config), "provision")
        assert provisioned.code == 0, provisioned.output
        assert "outbox of `default`" in provisioned.output

        outbox = setup.outbox()
        with sqlite3.connect(tmp_path / "queue.db") as conn:  # commits on leaving
            ids = [outbox.dispatch_in_sync(conn, Placed(order=n)) for n in (1, 2, 3)]
        await outbox.aclose()

        relayed = run("--config", str(setup.config), "relay", "--drain")
        assert relayed.code == 0, relayed.output
        assert "relayed 3 outbox rows" in relayed.output
        assert set(await arrived(setup, {1, 2, 3})) == {1, 2, 3}
        assert len(set(ids)) == 3


async def test_a_blocking_psycopg_connection_writes_the_outbox_row_in_its_transaction(
    tmp_path: Path,
) -> None:
    async with outbox_setup("postgres", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        try:
            with psycopg.connect(PG_URL) as conn:
                with conn.transaction():
                    outbox.dispatch_in_sync(conn, Placed(order=1))
                try:
                    with conn.transaction():
                        outbox.dispatch_in_sync(conn, Placed(order=2))
                        raise RuntimeError("the application's write failed")
                except RuntimeError:
                    pass
            assert await outbox.pending() == 1
        finally:
            await outbox.aclose()

        relayed = run("--config", str(setup.config), "relay", "--drain")
        assert relayed.code == 0, relayed.output
        assert dict(await arrived(setup, {1})) == {1: 1}


async def test_doctor_shows_what_waits_in_the_outbox(tmp_path: Path) -> None:
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        with sqlite3.connect(tmp_path / "queue.db") as conn:
            outbox.dispatch_in_sync(conn, Placed(order=1))
        await outbox.aclose()

        result = run("--config", str(setup.config), "doctor")

        assert "outbox of `default`" in result.output, result.output
        assert "1 row(s) waiting for a relay" in result.output, result.output
        assert "Traceback" not in result.output

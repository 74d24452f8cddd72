# SPDX-License-Identifier: MIT
"""An outbox bound for a connection that encrypts payloads keeps them sealed: the row in the
application's database holds no plaintext, and the job the relay delivers opens with the
target's key ring (SQLite application file, SQLite target)."""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path

import pytest

from rainier_queue import Job, JobContext
from rainier_queue.connections import QueueConfig
from rainier_queue.envelope.sealing import is_sealed
from rainier_queue.outbox import Relay

pytest.importorskip("cryptography")

SECRET = "attack-at-dawn-by-the-east-gate"


class Note(Job):
    name = "secret-note"
    text: str

    def handle(self, ctx: JobContext) -> None:
        return None


async def test_an_outbox_row_bound_for_an_encrypting_connection_holds_no_plaintext(
    tmp_path: Path,
) -> None:
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    app_db = tmp_path / "app.db"
    config = QueueConfig.from_mapping(
        {
            "connections": {
                "main": {
                    "url": f"sqlite:///{tmp_path / 'jobs.db'}",
                    "encryption": f"k1:{key}",
                    "outbox": f"sqlite:///{app_db}",
                }
            }
        }
    )
    outbox = config.open_outbox("main")
    assert outbox is not None
    target = config.open("main")
    try:
        await outbox.provision()
        with sqlite3.connect(app_db) as conn:
            await outbox.dispatch_in(conn, Note(text=SECRET))
        with sqlite3.connect(app_db) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            stored = [
                repr(row)
                for table in tables
                if table.startswith("rq_outbox_")
                for row in conn.execute(f'SELECT * FROM "{table}"')
            ]
        assert any("secret-note" in row for row in stored), "the reader reads the outbox row"
        assert not any(SECRET in row for row in stored), stored

        assert await Relay(outbox, target).drain() == 1
        [held] = await target.reserve("default", limit=1)
        assert is_sealed(held.job.payload), "delivered as it was written: sealed"
        assert target.payload_keys is not None
        assert target.payload_keys.open(held.job) == {"text": SECRET}
    finally:
        await outbox.aclose()
        await target.aclose()

# SPDX-License-Identifier: MIT
"""`rainier-queue work --with-relay`: one process relays its connection's outbox and
works the jobs that arrive, so a small deployment runs no relay of its own."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from ..cli.harness import run
from ..cli.sample_jobs import Note
from .harness import killed_at_exit, outbox_setup

APP = "tests.cli.sample_jobs:registry"


async def test_a_worker_with_relay_runs_the_jobs_its_outbox_committed(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    async with outbox_setup("sqlite", "redis", tmp_path) as setup:
        outbox = setup.outbox()
        app = await setup.app()
        try:
            await outbox.dispatch_many_in(
                app.connection, [Note(text=str(n), path=str(ledger)) for n in (1, 2, 3)]
            )
            await app.commit()
        finally:
            await app.close()
            await outbox.aclose()

        worker = setup.cli("--app", APP, "work", "--with-relay")
        with killed_at_exit(worker):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while not ledger.exists() or sorted(ledger.read_text().split()) != ["1", "2", "3"]:
                assert worker.poll() is None, worker.stderr.read().decode() if worker.stderr else ""
                assert loop.time() < deadline, "the worker did not run the outbox's jobs"
                await asyncio.sleep(0.1)  # a poll of the ledger the jobs write
            os.kill(worker.pid, signal.SIGTERM)
            assert await asyncio.to_thread(worker.wait) == 0


def test_a_worker_asked_to_relay_a_connection_without_an_outbox_says_so(tmp_path: Path) -> None:
    result = run("--url", f"sqlite:///{tmp_path / 'jobs.db'}", "--app", APP, "work", "--with-relay")

    assert result.code != 0
    assert "has no outbox" in result.output
    assert "Traceback" not in result.output

# SPDX-License-Identifier: MIT
"""MariaDB killed and restarted under running workers: they ride it out.

Particular to the MySQL driver (a private `mariadbd` this test starts and
kills); the claims-between-processes and killed-worker tests that every
shared driver passes are in `test_workers.py`.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from rainier_queue.envelope import QueuedJob

from ..mysql_service import ThrowawayServer
from .harness import assert_drained, config, count, output, worker
from .test_workers import push

pytestmark = pytest.mark.slow


@pytest.mark.timeout(240)
async def test_workers_ride_out_a_killed_and_restarted_server_and_every_job_finishes(
    tmp_path: Path,
) -> None:
    server = ThrowawayServer(tmp_path / "server")
    server.start()
    try:
        url = f"{server.url}?prefix=rq_"
        conf = config(tmp_path, url, lease="2s")
        ledger = tmp_path / "ledger.db"
        total = 400
        jobs = [
            QueuedJob.create("slow", {"n": n, "seconds": 0.05}, max_attempts=10)
            for n in range(total)
        ]
        await push(url, jobs)
        settings = (
            "--concurrency",
            "4",
            "--timeout",
            "1.5s",
            "--sleep",
            "0.2s",
            "--max-error-backoff",
            "1s",
        )
        workers = [worker(conf, ledger, *settings) for _ in range(2)]
        try:
            deadline = time.monotonic() + 60
            while len(count(ledger, "finish")) < 40:
                assert time.monotonic() < deadline, "the workers never got going"
                await asyncio.sleep(0.05)
            server.kill()  # mid-run: claims, settles and polls all fail now
            await asyncio.sleep(3)
            for w in workers:
                assert w.poll() is None, "a worker gave up on the outage: " + output(w)
            server.start()

            deadline = time.monotonic() + 120
            while set(count(ledger, "finish")) != set(range(total)):
                assert time.monotonic() < deadline, "the workers did not finish after the restart"
                for w in workers:
                    assert w.poll() is None, output(w)
                await asyncio.sleep(0.1)
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                await asyncio.to_thread(w.wait, 60)

        # Every job pushed before the crash was still there after it (a commit
        # is on disk), and each ran to the end; one whose acknowledgement the
        # crash swallowed may have run again, which at-least-once allows.
        await assert_drained(url)
    finally:
        server.stop()

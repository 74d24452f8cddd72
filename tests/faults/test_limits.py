# SPDX-License-Identifier: MIT
"""Limits per key held across three CLI worker processes, read from the ledger.

Each worker counts against the same store (its connection's database or
Redis, Kafka's lock store), so the bound holds for the three together, not
each alone. What is asserted comes from the ledger the handlers write (when
each run started and finished), never from how long the test took:

- a rate of 5 starts a second: in any one-second window of the ledger's
  start rows, at most 5 + 2. The limiter spaces a key's starts at least
  0.2 s apart, so no window of a second holds more than 5 grants; the 2 are
  for the moment between a start being granted and its handler writing its
  row, which a loaded machine stretches and squeezes. Without the limit,
  30 jobs on 12 slots start well inside one second;
- a concurrency of 2 per key: never more than two runs of the key open at
  once, from the ledger's start and finish rows;
- and every job ran exactly once, on its first attempt: being set aside
  costs no attempt.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.job import LIMIT_KEY

from ..contract.backends import Backend
from .harness import config, output, terminate, worker

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]

LIMITED_APP = "tests.faults.ledger_jobs:limited"
RATE, WINDOW, TOLERANCE = 5, 1.0, 2
"""5 starts a second (`Rated.rate_limit`), and how far over it a window may go (above)."""


@pytest.fixture
async def url(backend: Backend, tmp_path: Path) -> AsyncIterator[str]:
    namespace = "rql" + uuid.uuid4().hex[:10]
    backend.setup(tmp_path, namespace, ["default"])
    address = backend.url(tmp_path, namespace)
    queue = open_queue(address)
    limits = queue.capabilities.limits
    await queue.aclose()
    if not limits:
        pytest.skip(f"{backend.name} keeps no limits without `locks` (tests/contract/test_limits)")
    yield address
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


def runs(ledger: Path) -> list[tuple[int, int, str, float]]:
    """(n, attempt, event, at) rows, in the order written."""
    conn = sqlite3.connect(ledger, timeout=30)
    try:
        return list(conn.execute("SELECT n, attempt, event, at FROM runs ORDER BY rowid"))
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


async def run_three(
    tmp_path: Path, url: str, jobs: list[QueuedJob], within: float = 240
) -> list[tuple[int, int, str, float]]:
    """Push `jobs`, run three CLI workers until every one finished, stop them; the ledger."""
    queue = open_queue(url)
    try:
        await queue.push_many(jobs)
    finally:
        await queue.aclose()
    ledger = tmp_path / "ledger.db"
    cfg = config(tmp_path, url)
    procs: list[subprocess.Popen[bytes]] = [
        worker(cfg, ledger, "--concurrency", "4", app=LIMITED_APP) for _ in range(3)
    ]
    try:
        deadline = time.monotonic() + within
        while sum(1 for row in runs(ledger) if row[2] == "finish") < len(jobs):
            for proc in procs:
                assert proc.poll() is None, f"a worker exited: {output(proc)}"
            assert time.monotonic() < deadline, "not every job finished: " + "\n".join(
                output(p)[-2000:] for p in procs
            )
            await asyncio.sleep(0.2)
    finally:
        codes = [await terminate(proc) for proc in procs]
    assert codes == [0, 0, 0], "\n".join(output(p)[-2000:] for p in procs)
    return runs(ledger)


def job(name: str, n: int, key: str, **fields: object) -> QueuedJob:
    return QueuedJob.create(
        name, {"n": n, "key": key, **fields}, max_attempts=3, headers={LIMIT_KEY: key}
    )


@pytest.mark.timeout(300)
async def test_a_rate_limit_holds_across_three_worker_processes(tmp_path: Path, url: str) -> None:
    key = f"rate-{uuid.uuid4().hex[:8]}"
    ledger = await run_three(tmp_path, url, [job("rated", n, key) for n in range(30)])

    starts = sorted(at for _, _, event, at in ledger if event == "start")
    busiest = max(
        sum(1 for later in starts[i:] if later < first + WINDOW) for i, first in enumerate(starts)
    )
    assert len(starts) == 30
    assert busiest <= RATE + TOLERANCE, f"{busiest} starts in one {WINDOW:g}s window"
    assert {attempt for _, attempt, event, _ in ledger if event == "start"} == {1}


@pytest.mark.timeout(300)
async def test_a_concurrency_limit_of_two_per_key_is_never_exceeded_across_three_workers(
    tmp_path: Path, url: str
) -> None:
    key, other = f"pair-{uuid.uuid4().hex[:8]}", f"pair-{uuid.uuid4().hex[:8]}"
    jobs = [job("paired", n, key) for n in range(16)]
    jobs += [job("paired", 100 + n, other) for n in range(8)]
    ledger = await run_three(tmp_path, url, jobs)

    most = {key: 0, other: 0}
    open_now = {key: 0, other: 0}
    for n, _, event, _ in ledger:  # in the order the rows were written
        mine = key if n < 100 else other
        if event == "start":
            open_now[mine] += 1
            most[mine] = max(most[mine], open_now[mine])
        elif event == "finish":
            open_now[mine] -= 1
    assert most[key] <= 2, f"{most[key]} runs of one key at once"
    assert most[other] <= 2
    finished = sorted(n for n, _, event, _ in ledger if event == "finish")
    assert finished == [*range(16), *range(100, 108)]
    assert {attempt for _, attempt, event, _ in ledger if event == "start"} == {1}

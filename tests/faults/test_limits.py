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


@pytest.mark.timeout(300)
async def test_a_killed_worker_s_slots_come_free_with_its_jobs_leases(
    tmp_path: Path, url: str
) -> None:
    """Two slots per key, both held by a worker that is SIGKILLed mid-run: nothing gives them
    back, yet they lapse with the jobs' leases, the two jobs run again elsewhere, and the key
    never has more than two runs open (the dead ones counted open until the kill)."""
    key = f"dead-{uuid.uuid4().hex[:8]}"
    total = 8
    queue = open_queue(url)
    try:
        await queue.push_many([job("paired", n, key, seconds=1.0) for n in range(total)])
    finally:
        await queue.aclose()
    ledger = tmp_path / "ledger.db"
    conf = config(tmp_path, url, lease="2s")
    settings = ("--concurrency", "4", "--timeout", "1.5s", "--sleep", "0.2s")

    doomed = worker(conf, ledger, *settings, app=LIMITED_APP)
    deadline = time.monotonic() + 60
    while sum(1 for row in runs(ledger) if row[2] == "start") < 2:
        assert time.monotonic() < deadline, f"the first worker never started: {output(doomed)}"
        assert doomed.poll() is None, output(doomed)
        await asyncio.sleep(0.05)
    doomed.kill()
    await asyncio.to_thread(doomed.wait)
    killed_at = time.time()

    rescuers = [worker(conf, ledger, *settings, app=LIMITED_APP) for _ in range(2)]
    try:
        deadline = time.monotonic() + 150
        while {n for n, _, event, _ in runs(ledger) if event == "finish"} != set(range(total)):
            assert time.monotonic() < deadline, "\n".join(output(r)[-2000:] for r in rescuers)
            for rescuer in rescuers:
                assert rescuer.poll() is None, output(rescuer)
            await asyncio.sleep(0.1)
    finally:
        for rescuer in rescuers:
            await terminate(rescuer)

    rows = _rows_with_pids(ledger)
    dead = [(n, attempt) for n, attempt, pid, event, _ in rows if pid == doomed.pid]
    cut = {run for run in dead if dead.count(run) == 1}  # a start without its finish
    assert cut, "the kill should land while the doomed worker runs jobs"
    # The runs as intervals: a cut run is open until the kill.
    moments: list[tuple[float, int]] = []
    for n, attempt, pid, event, at in rows:
        if event == "start":
            moments.append((at, 1))
            if pid == doomed.pid and (n, attempt) in cut:
                moments.append((killed_at, -1))
        elif event == "finish":
            moments.append((at, -1))
    open_now = most = 0
    for _, change in sorted(moments, key=lambda m: (m[0], m[1])):
        open_now += change
        most = max(most, open_now)
    assert most <= 2, f"{most} runs of one key open at once"
    for n, _ in cut:
        assert any(r[0] == n and r[1] >= 2 and r[3] == "finish" for r in rows), (
            f"job {n} was cut short by the kill; it must run again, in a slot that came free"
        )


def _rows_with_pids(ledger: Path) -> list[tuple[int, int, int, str, float]]:
    """(n, attempt, pid, event, at) rows, in the order written."""
    conn = sqlite3.connect(ledger, timeout=30)
    try:
        return list(conn.execute("SELECT n, attempt, pid, event, at FROM runs ORDER BY rowid"))
    finally:
        conn.close()

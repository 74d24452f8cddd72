# SPDX-License-Identifier: MIT
"""Ordering keys held across three CLI worker processes, read from the ledger.

Three keys' jobs are dispatched in order, each key's interleaved with the
others', and three worker processes of four slots each run them. What is
asserted comes from the ledger the handlers write (each run's start and
finish, in the order written), never from how long the test took:

- each key's jobs started in the order they were dispatched, each after the
  one before it finished: never two runs of one key open at once;
- runs of different keys were open at the same time, so a key holds back only
  its own jobs (on a driver whose reserved job lets the ones behind it go:
  on Kafka, keys that share a partition share its line);
- every job ran once, on its first attempt.

And with a worker SIGKILLed mid-job: the jobs it held run again once their
leases lapse, each before the next job of its key starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.job import ORDERING_KEY

from ..contract.backends import Backend
from .harness import config, events, output, terminate, worker

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]

PER_KEY = 8


@pytest.fixture
async def url(backend: Backend, tmp_path: Path) -> AsyncIterator[str]:
    namespace = "rqo" + uuid.uuid4().hex[:10]
    backend.setup(tmp_path, namespace, ["default"])
    address = backend.url(tmp_path, namespace)
    queue = open_queue(address)
    ordered = queue.capabilities.ordering_keys
    await queue.aclose()
    if not ordered:
        pytest.skip(
            f"{backend.name} keeps no ordering keys; it refuses such a job "
            "(tests/contract/test_ordering_keys.py)"
        )
    yield address
    if backend.cleanup is not None:
        await backend.cleanup(tmp_path, namespace)


def runs(ledger: Path) -> list[tuple[int, int, str]]:
    """(n, attempt, event) rows, in the order written."""
    conn = sqlite3.connect(ledger, timeout=30)
    try:
        return list(conn.execute("SELECT n, attempt, event FROM runs ORDER BY rowid"))
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def ordered(n: int, key: str) -> QueuedJob:
    return QueuedJob.create(
        "ordered", {"n": n, "key": key}, max_attempts=3, headers={ORDERING_KEY: key}
    )


@pytest.mark.timeout(300)
async def test_each_key_s_jobs_run_in_dispatch_order_without_overlap_across_three_workers(
    tmp_path: Path, url: str
) -> None:
    keys = [f"account-{uuid.uuid4().hex[:6]}-{k}" for k in range(3)]
    # n = key index * 100 + place in its key's line; the keys interleaved on the queue.
    jobs = [ordered(k * 100 + i, keys[k]) for i in range(PER_KEY) for k in range(len(keys))]
    queue = open_queue(url)
    try:
        for job in jobs:  # one dispatch after another, as an application makes them
            await queue.push(job)
        steps_aside = queue.capabilities.reserved_job_steps_aside
    finally:
        await queue.aclose()

    ledger = tmp_path / "ledger.db"
    cfg = config(tmp_path, url)
    procs: list[subprocess.Popen[bytes]] = [
        worker(cfg, ledger, "--concurrency", "4") for _ in range(3)
    ]
    try:
        deadline = time.monotonic() + 240
        while sum(1 for row in runs(ledger) if row[2] == "finish") < len(jobs):
            for proc in procs:
                assert proc.poll() is None, f"a worker exited: {output(proc)}"
            assert time.monotonic() < deadline, f"not every job finished: {runs(ledger)}\n" + (
                "\n".join(output(p)[-2000:] for p in procs)
            )
            await asyncio.sleep(0.2)
    finally:
        codes = [await terminate(proc) for proc in procs]
    assert codes == [0, 0, 0], "\n".join(output(p)[-2000:] for p in procs)
    rows = runs(ledger)

    open_now = dict.fromkeys(range(len(keys)), 0)
    overlaps: list[int] = []
    keys_at_once = 0
    started: dict[int, list[int]] = {k: [] for k in range(len(keys))}
    for n, _, event in rows:  # in the order the rows were written
        key = n // 100
        if event == "start":
            open_now[key] += 1
            started[key].append(n % 100)
            if open_now[key] > 1:
                overlaps.append(n)
            keys_at_once = max(keys_at_once, sum(1 for c in open_now.values() if c))
        elif event == "finish":
            open_now[key] -= 1
    assert overlaps == [], f"runs of one key open at once: {overlaps}"
    for key in started:
        assert started[key] == list(range(PER_KEY)), f"key {key} ran out of order"
    assert {attempt for _, attempt, event in rows if event == "start"} == {1}
    if steps_aside:
        assert keys_at_once > 1, "the keys' jobs never ran side by side"


@pytest.mark.timeout(300)
async def test_a_key_s_order_holds_when_a_worker_is_killed_mid_job(
    tmp_path: Path, url: str
) -> None:
    """A worker SIGKILLed while it runs jobs of several keys: each killed job's lease lapses,
    and it runs again (a later attempt) before the next job of its key starts; no job of a
    key starts before every earlier one of its key has finished."""
    keys = [f"account-{uuid.uuid4().hex[:6]}-{k}" for k in range(3)]
    per_key = 5
    jobs = [
        QueuedJob.create(
            "ordered",
            {"n": k * 100 + i, "key": keys[k], "seconds": 0.3},
            max_attempts=5,
            headers={ORDERING_KEY: keys[k]},
        )
        for i in range(per_key)
        for k in range(len(keys))
    ]
    queue = open_queue(url)
    try:
        for job in jobs:
            await queue.push(job)
    finally:
        await queue.aclose()
    conf = config(tmp_path, url, lease="2s")
    ledger = tmp_path / "ledger.db"
    settings = ("--concurrency", "4", "--timeout", "1.5s", "--sleep", "0.2s")

    doomed = worker(conf, ledger, *settings)
    deadline = time.monotonic() + 60
    while sum(1 for *_, e in events(ledger) if e == "start") < 2:
        assert time.monotonic() < deadline, f"the first worker never started: {output(doomed)}"
        assert doomed.poll() is None, output(doomed)
        await asyncio.sleep(0.02)
    os.kill(doomed.pid, signal.SIGKILL)
    await asyncio.to_thread(doomed.wait)
    mine = [(n, e) for _, n, _, pid, e in events(ledger) if pid == doomed.pid]
    interrupted = {n for n, e in mine if e == "start"} - {n for n, e in mine if e == "finish"}
    assert interrupted, "the kill should land while jobs are running"

    rescuers = [worker(conf, ledger, *settings) for _ in range(2)]
    try:
        wanted = {job.payload["n"] for job in jobs}
        deadline = time.monotonic() + 200
        while {n for _, n, _, _, e in events(ledger) if e == "finish"} != wanted:
            assert time.monotonic() < deadline, f"not every job finished: {events(ledger)}"
            for rescuer in rescuers:
                assert rescuer.poll() is None, output(rescuer)
            await asyncio.sleep(0.2)
    finally:
        codes = [await terminate(rescuer) for rescuer in rescuers]
    assert codes == [0, 0], "\n".join(output(r)[-2000:] for r in rescuers)

    finished: set[int] = set()
    early: list[str] = []
    for _, n, attempt, _, event in events(ledger):  # in the order written
        if event == "finish":
            finished.add(n)
        elif any(m not in finished for m in range(n - n % 100, n)):
            early.append(f"{n} (attempt {attempt})")
    assert early == [], f"started before an earlier job of its key had finished: {early}"
    for n in interrupted:
        reruns = [a for _, m, a, pid, e in events(ledger) if m == n and e == "start" and a >= 2]
        assert reruns, f"job {n} was running when its worker died; it must run again"

# SPDX-License-Identifier: MIT
"""Plain `def` jobs that run past their timeout, through several real worker processes.

Python cannot stop a thread, so a worker that settled a timed-out job at
its timeout let the retry start beside the thread still running it, and
ran more handlers than its concurrency. The ledger's rows, written by the
handlers themselves in the order they happened, show both from outside:
each job's attempts must follow one another, and no process may ever have
more runs open than its `--concurrency`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import pytest

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import FailedJobListing

from .harness import config, count, events, output, worker

pytestmark = [pytest.mark.slow, pytest.mark.needs("processes")]

JOBS = 12
PROCESSES = 3
CONCURRENCY = 2


def runs_of_each_job(rows: list[tuple[str, int, int, int, str]]) -> dict[int, list[str]]:
    """Each job's start and end rows, in the order they were written: `start 1`, `end 1`, …"""
    runs: dict[int, list[str]] = defaultdict(list)
    for _, n, attempt, _, event in rows:
        if event in ("start", "end"):
            runs[n].append(f"{event} {attempt}")
    return dict(runs)


def most_at_once_in_each_process(rows: list[tuple[str, int, int, int, str]]) -> dict[int, int]:
    """The most runs any one process had started and not yet ended, at any row."""
    running: dict[int, int] = defaultdict(int)
    most: dict[int, int] = defaultdict(int)
    for _, _, _, pid, event in rows:
        if event == "start":
            running[pid] += 1
            most[pid] = max(most[pid], running[pid])
        elif event == "end":
            running[pid] -= 1
    return dict(most)


@pytest.mark.timeout(300)
async def test_plain_def_jobs_past_their_timeout_never_run_twice_at_once_across_processes(
    tmp_path: Path, url: str
) -> None:
    queue = open_queue(url)
    try:
        await queue.push_many([QueuedJob.create("overrun", {"n": n}) for n in range(JOBS)])
    finally:
        await queue.aclose()
    ledger = tmp_path / "ledger.db"
    conf = config(tmp_path, url)
    settings = ("--stop-when-empty", "--concurrency", str(CONCURRENCY), "--sleep", "0.2s")

    procs = [worker(conf, ledger, *settings) for _ in range(PROCESSES)]
    codes = [await asyncio.to_thread(p.wait, 240) for p in procs]

    assert codes == [0] * PROCESSES, [output(p) for p in procs]
    rows = events(ledger)
    one_after_another = ["start 1", "end 1", "start 2", "end 2"]
    runs = runs_of_each_job(rows)
    overlapped = {n: each for n, each in runs.items() if each != one_after_another}
    assert overlapped == {}, "a job's attempts overlapped, or a job did not run twice"
    most = most_at_once_in_each_process(rows)
    assert max(most.values()) <= CONCURRENCY, f"a process ran more than its concurrency: {most}"
    assert count(ledger, "finish") == dict.fromkeys(range(JOBS), 1)
    queue = open_queue(url)
    try:
        assert await queue.size("default") == 0
        assert isinstance(queue, FailedJobListing)  # Kafka reads its failed topic
        assert await queue.failed_jobs() == []
    finally:
        await queue.aclose()

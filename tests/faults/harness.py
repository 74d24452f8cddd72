# SPDX-License-Identifier: MIT
"""Start real worker processes through the CLI and read the ledger they leave.

Also the steps every broker-fault test takes around its fault: push the
ledger's `slow` jobs, wait until a set of them has finished with the worker
still alive, stop the worker gracefully, and check that nothing was left
queued or failed and that each job ran to the end once.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from rainier_queue.connections import open_queue
from rainier_queue.envelope import QueuedJob
from rainier_queue.queue import FailedJobStore

from .ledger_jobs import ledger as open_ledger

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.faults.ledger_jobs:registry"


async def push_all(url: str, jobs: list[QueuedJob]) -> None:
    """Push `jobs` through the URL's driver, two thousand to a `push_many`."""
    queue = open_queue(url)
    try:
        for start in range(0, len(jobs), 2000):
            await queue.push_many(jobs[start : start + 2000])
    finally:
        await queue.aclose()


def config(folder: Path, url: str, **options: str) -> Path:
    """A `rainier-queue.toml` with one connection, for workers started with `--config`."""
    lines = ["[connections.main]", f'url = "{url}"', *(f'{k} = "{v}"' for k, v in options.items())]
    path = folder / "rainier-queue.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def worker(
    config_file: Path,
    ledger: Path,
    *args: str,
    within: Sequence[str] = (),
    app: str = APP,
) -> subprocess.Popen[bytes]:
    """A `rainier-queue work` process on the config's queue, writing runs to `ledger`.

    `within` goes before the command: `ip netns exec <namespace>` runs the
    worker in another network namespace (tests/partition.py).
    """
    open_ledger(str(ledger)).close()  # made here, once, before any worker writes to it
    env = {**os.environ, "RAINIER_QUEUE_TEST_LEDGER": str(ledger), "PYTHONPATH": str(ROOT)}
    command = ["--app", app, "--config", str(config_file), "work", *args]
    log = ledger.parent / f"worker-{len(list(ledger.parent.glob('worker-*.log')))}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*within, sys.executable, "-m", "rainier_queue", *command],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def output(proc: subprocess.Popen[bytes]) -> str:
    """What a worker started by `worker` printed."""
    log: Path = proc.log  # type: ignore[attr-defined]
    return log.read_text(encoding="utf-8", errors="replace")


def events(ledger: Path) -> list[tuple[str, int, int, int, str]]:
    """(job_id, n, attempt, pid, event) rows, in the order they were written."""
    if not ledger.exists():
        return []
    conn = sqlite3.connect(ledger, timeout=30)
    try:
        return list(conn.execute("SELECT job_id, n, attempt, pid, event FROM runs ORDER BY rowid"))
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def count(ledger: Path, event: str) -> Counter[int]:
    """How many times each job number logged `event`."""
    return Counter(n for _, n, _, _, e in events(ledger) if e == event)


async def push_slow(url: str, numbers: Iterable[int], seconds: float = 0.02) -> None:
    """Push one ledger `slow` job per number, in one bulk push, to the queue at `url`."""
    queue = open_queue(url)
    try:
        await queue.push_many(
            [
                QueuedJob.create("slow", {"n": n, "seconds": seconds}, max_attempts=5)
                for n in numbers
            ]
        )
    finally:
        await queue.aclose()


async def until_finished(
    ledger: Path, proc: subprocess.Popen[bytes], numbers: set[int], within: float = 60
) -> None:
    """Wait until every job in `numbers` has a finish in the ledger, the worker alive throughout.

    `within` is a liveness bound (seconds), not a timing assertion.
    """
    deadline = time.monotonic() + within
    while not numbers <= set(count(ledger, "finish")):
        assert proc.poll() is None, f"the worker exited: {output(proc)}"
        assert time.monotonic() < deadline, f"not every job finished: {output(proc)}"
        await asyncio.sleep(0.1)


async def until_working(proc: subprocess.Popen[bytes], within: float = 60) -> None:
    """Wait until a worker started by `worker` says it is working (or has exited).

    Its signal handlers are in place from then on. A SIGTERM before that, while
    Python still imports (seconds on a loaded machine), ends the process by the
    default action, exit -15, which says nothing of how a worker stops.
    """
    deadline = time.monotonic() + within
    while proc.poll() is None and time.monotonic() < deadline:
        if "working " in output(proc):
            return
        await asyncio.sleep(0.05)


async def terminate(proc: subprocess.Popen[bytes], within: float = 60) -> int:
    """SIGTERM the worker once it is working, and wait for it: a graceful stop, its exit code."""
    await until_working(proc, within)
    proc.send_signal(signal.SIGTERM)
    return await asyncio.to_thread(proc.wait, within)


def rode_out_an_outage(printed: str, outage: str) -> bool:
    """Whether a worker's output shows `outage` and a nonzero count of broker errors ridden out."""
    ridden = re.search(r"(\d+) broker errors? ridden out", printed)
    return outage in printed and ridden is not None and int(ridden.group(1)) > 0


def each_finished_once(ledger: Path, numbers: Iterable[int]) -> None:
    """Assert that exactly the jobs in `numbers` finished, none of them twice."""
    finished = count(ledger, "finish")
    twice = sorted(n for n, times in finished.items() if times > 1)
    assert twice == [], f"jobs run to the end more than once: {twice}"
    assert set(finished) == set(numbers)


def finished_again_only_after(ledger: Path, numbers: Iterable[int], since: float) -> None:
    """Assert that exactly the jobs in `numbers` finished, and any that finished twice had
    first finished at or after `since` (wall-clock seconds, as the ledger writes them)."""
    first: dict[int, float] = {}
    twice: list[int] = []
    for n, at in _finishes(ledger):
        if n in first:
            twice.append(n)
        else:
            first[n] = at
    early = sorted(n for n in set(twice) if first[n] < since)
    assert early == [], f"jobs finished before the window yet run to the end again: {early}"
    assert set(first) == set(numbers)


def _finishes(ledger: Path) -> list[tuple[int, float]]:
    conn = sqlite3.connect(ledger, timeout=30)
    try:
        return list(conn.execute("SELECT n, at FROM runs WHERE event = 'finish' ORDER BY rowid"))
    finally:
        conn.close()


async def assert_drained(url: str, queue_name: str = "default") -> None:
    """Assert that the queue at `url` holds no job and its failed store none either."""
    queue = open_queue(url)
    try:
        assert await queue.size(queue_name) == 0
        assert isinstance(queue, FailedJobStore)
        assert await queue.failed_jobs() == []
    finally:
        await queue.aclose()

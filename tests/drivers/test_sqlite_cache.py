# SPDX-License-Identifier: MIT
"""The SQLite cache across processes: what makes it `is_shared`.

The cache contract covers each operation inside one process; here several
processes race on one file, as workers taking unique-job locks do.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from datetime import timedelta
from multiprocessing.synchronize import Event
from pathlib import Path

from rainier_queue.cache import LockManager
from rainier_queue.cache.sqlite import SQLiteCache
from rainier_queue.cache.stores import open_cache

KEYS = 100
PROCESSES = 3


def _contend(path: str, me: int, out: str, ready: Event, go: Event) -> None:
    """Try to take every lock and bump one counter; write down the locks won."""

    async def main() -> list[str]:
        cache = SQLiteCache(path, busy_timeout=timedelta(seconds=30))
        await cache.get("warm-up")
        ready.set()
        go.wait()
        won = [
            f"k{i}"
            for i in range(KEYS)
            if await cache.add(f"k{i}", str(me).encode(), timedelta(minutes=5))
        ]
        for _ in range(KEYS):
            await cache.increment("counter")
        await cache.aclose()
        return won

    Path(out).write_text("\n".join(asyncio.run(main())))


def _race(path: Path) -> list[list[str]]:
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(PROCESSES)]
    outs = [path.with_name(f"won-{n}.txt") for n in range(PROCESSES)]
    procs = [
        ctx.Process(target=_contend, args=(str(path), n, str(outs[n]), readies[n], go))
        for n in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for ready in readies:
        assert ready.wait(60), "a process never started"
    go.set()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0, f"a process failed (exit code {proc.exitcode})"
    return [out.read_text().split() for out in outs]


async def test_processes_racing_for_the_same_keys_each_key_has_one_winner(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache.db"

    won = await asyncio.to_thread(_race, path)

    every_win = sorted(key for keys in won for key in keys)
    assert every_win == sorted(f"k{i}" for i in range(KEYS))
    cache = SQLiteCache(path)
    assert await cache.increment("counter", 0) == KEYS * PROCESSES, "no increment was lost"
    await cache.aclose()


async def test_a_lock_taken_through_one_file_is_held_for_every_other_opener(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    mine, theirs = LockManager(open_cache(url)), LockManager(open_cache(url))
    assert mine.is_shared

    lock = await mine.acquire("send-report", timedelta(minutes=1))

    assert lock is not None
    assert await theirs.acquire("send-report", timedelta(minutes=1)) is None
    assert await mine.release(lock)
    assert await theirs.acquire("send-report", timedelta(minutes=1)) is not None
    await mine.cache.aclose()
    await theirs.cache.aclose()

# SPDX-License-Identifier: MIT
"""A first benchmark: bulk enqueue N no-op jobs, then drain them with P worker processes.

Prints enqueue jobs/s and end-to-end jobs/s for the memory driver (one
process, in-process worker) and SQLite (P processes through the CLI).
The full side-by-side comparison with peer libraries is a separate tool;
this one answers "how fast is the embedded default here, now".

    .venv/bin/python -m bench.drain --jobs 20000 --processes 2 --concurrency 16
    .venv/bin/python -m bench.drain --url 'postgresql://postgres@127.0.0.1/test?prefix=bench_'

`--url` drains through that queue instead of a temporary SQLite file; it
should be empty to start with.

A drain should not slow down as the backlog grows, so it also reports the
rate over the first and the last tenth of the drain (from 1% to 11% done,
and from 89% to 99%, so start-up and the last short claims count in
neither), and the size of the jobs table and its indexes once it is empty.
For those, `done` is read a few times a second: on PostgreSQL from the
table's delete counter (`pg_stat_user_tables`), elsewhere from the lowest
`seq` left (jobs are claimed in push order, so the rows below it are gone).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from rainier_queue import QueuedJob, Worker, WorkerOptions
from rainier_queue.connections import open_queue

from .noop_jobs import registry, start_drainers

ROOT = Path(__file__).resolve().parents[1]


def envelopes(count: int) -> list[QueuedJob]:
    return [QueuedJob.create("bench-noop", {"n": n}, max_attempts=1) for n in range(count)]


async def enqueue(url: str, jobs: list[QueuedJob], batch: int = 5000) -> float:
    queue = open_queue(url)
    try:
        await queue.size("default")
        started = time.perf_counter()
        for i in range(0, len(jobs), batch):
            await queue.push_many(jobs[i : i + batch])
        return time.perf_counter() - started
    finally:
        await queue.aclose()


async def memory_run(count: int, concurrency: int) -> tuple[float, float]:
    queue = open_queue("memory://")
    jobs = envelopes(count)
    started = time.perf_counter()
    for i in range(0, count, 1000):
        await queue.push_many(jobs[i : i + 1000])
    pushed = time.perf_counter() - started
    worker = Worker(queue, registry, WorkerOptions(concurrency=concurrency, stop_when_empty=True))
    started = time.perf_counter()
    stats = await worker.run()
    drained = time.perf_counter() - started
    assert stats.processed == count, stats
    return pushed, drained


def cli_drain(url: str, processes: int, concurrency: int) -> float:
    started, _ = cli_drain_sampled(url, processes, concurrency, None)
    return started


Progress = Callable[[], int]
"""How many jobs of the drain are done, read without disturbing it much."""


def cli_drain_sampled(
    url: str, processes: int, concurrency: int, done: Progress | None
) -> tuple[float, list[tuple[float, int]]]:
    """Drain with `processes` CLI workers; (seconds taken, (time, jobs done) samples)."""
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        assert done is not None
        while not stop.wait(0.2):
            samples.append((time.perf_counter(), done()))

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.perf_counter()
    procs = start_drainers(url, concurrency, processes)
    if done is not None:
        sampler.start()
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - started
    stop.set()
    if done is not None:
        sampler.join()
    if any(codes):
        raise SystemExit(f"a worker exited with {codes}")
    return elapsed, samples


def window_rate(samples: list[tuple[float, int]], count: int, low: float, high: float) -> float:
    """Jobs/s between the samples where `low` and `high` of `count` were first done."""

    def crossing(share: float) -> tuple[float, int] | None:
        return next((s for s in samples if s[1] >= share * count), None)

    first, last = crossing(low), crossing(high)
    if first is None or last is None or last[0] <= first[0]:
        return float("nan")  # a drain too short for the sampler to see both moments
    return (last[1] - first[1]) / (last[0] - first[0])


def _jobs_table(url: str) -> str:
    return (parse_qs(urlsplit(url).query).get("prefix") or ["rainier_"])[0] + "jobs"


def _pg_dsn(url: str) -> str:
    return url.split("?", 1)[0]


def progress_for(url: str, count: int) -> Progress:
    """A reader of how many of the `count` jobs just pushed to `url` are done."""
    table = _jobs_table(url)
    if url.startswith("postgres"):
        import psycopg

        conn = psycopg.connect(_pg_dsn(url), autocommit=True)
        sql = "SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = %s"

        def deleted() -> int:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(sql, (table,)).fetchone()
            return int(row[0]) if row else 0

        base = deleted()
        return lambda: deleted() - base
    if url.startswith("sqlite"):
        path = url.split("://", 1)[1].split("?", 1)[0]
        lite = sqlite3.connect(path, check_same_thread=False)
        first = lite.execute(f"SELECT MIN(seq), MAX(seq) FROM {table}").fetchone()
        low, high = int(first[0]), int(first[1])

        def below() -> int:
            row = lite.execute(f"SELECT seq FROM {table} ORDER BY seq LIMIT 1").fetchone()
            return count if row is None else min(count, int(row[0]) - low)

        assert high - low + 1 == count, "the queue was not empty before the push"
        return below
    raise SystemExit(f"no progress reader for {url}")


def sizes_after(url: str) -> str:
    """The jobs table's and its indexes' size on disk, as a line to print."""
    table = _jobs_table(url)
    if url.startswith("postgres"):
        import psycopg

        with psycopg.connect(_pg_dsn(url), autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_relation_size(%s), pg_indexes_size(%s)", (table, table)
            ).fetchone()
            assert row is not None
            parts = conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) "
                "FROM pg_index WHERE indrelid = %s::regclass ORDER BY 1",
                (table,),
            ).fetchall()
        each = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in parts)
        return f"table {row[0] / 1e6:.1f} MB, indexes {row[1] / 1e6:.1f} MB ({each})"
    path = url.split("://", 1)[1].split("?", 1)[0]
    with closing(sqlite3.connect(path)) as lite:
        pages = lite.execute("PRAGMA page_count").fetchone()[0]
        free = lite.execute("PRAGMA freelist_count").fetchone()[0]
        size = lite.execute("PRAGMA page_size").fetchone()[0]
    return f"file {pages * size / 1e6:.1f} MB, of it free pages {free * size / 1e6:.1f} MB"


async def sqlite_run(count: int, processes: int, concurrency: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        return await url_run(f"sqlite:///{Path(tmp) / 'bench.db'}", count, processes, concurrency)


async def url_run(url: str, count: int, processes: int, concurrency: int) -> tuple[float, float]:
    """Enqueue `count` jobs on `url`, then drain them with `processes` CLI workers."""
    pushed = await enqueue(url, envelopes(count))
    done = progress_for(url, count) if url.startswith(("postgres", "sqlite")) else None
    drained, samples = await asyncio.to_thread(cli_drain_sampled, url, processes, concurrency, done)
    queue = open_queue(url)
    try:
        left = await queue.size("default")
    finally:
        await queue.aclose()
    if left:
        raise SystemExit(f"{left} jobs were left behind")
    if samples:
        first = window_rate(samples, count, 0.01, 0.11)
        last = window_rate(samples, count, 0.89, 0.99)
        print(
            f"{url.split(':', 1)[0]}: first tenth {first:,.0f} jobs/s, last tenth "
            f"{last:,.0f} jobs/s ({(last / first - 1) * 100:+.0f}%); after the drain: "
            f"{sizes_after(url)}"
        )
    return pushed, drained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--url", help="drain through this queue instead of a temporary SQLite file")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory driver's run")
    args = parser.parse_args()
    rows = []
    if not args.no_memory:
        rows.append(("memory (1 process)", *asyncio.run(memory_run(args.jobs, args.concurrency))))
    if args.url:
        scheme = args.url.split(":", 1)[0]
        run = url_run(args.url, args.jobs, args.processes, args.concurrency)
    else:
        scheme = "sqlite"
        run = sqlite_run(args.jobs, args.processes, args.concurrency)
    rows.append((f"{scheme} ({args.processes} processes)", *asyncio.run(run)))
    print(f"{args.jobs} no-op jobs, concurrency {args.concurrency}")
    print(f"{'driver':<24}{'enqueue jobs/s':>16}{'end-to-end jobs/s':>20}")
    for name, pushed, drained in rows:
        print(f"{name:<24}{args.jobs / pushed:>16,.0f}{args.jobs / drained:>20,.0f}")


if __name__ == "__main__":
    main()

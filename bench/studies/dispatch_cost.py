# SPDX-License-Identifier: MIT
"""What dispatching costs on top of pushing: `dispatch_many` against the driver's `push_many`.

A dispatch builds the envelope (id, times, queue), checks and encodes the
job's fields, takes uniqueness locks, then pushes. If that work costs more
than the push itself, a web request that dispatches a batch spends its time
in this library rather than in the backend. This times both, on the same
jobs, per backend:

- **push_many**: the driver's own bulk push of envelopes built beforehand
  (untimed), the floor any dispatch could reach;
- **dispatch_many**: `QueueManager.dispatch_many` of the same `Job`
  instances, built beforehand too (building a job checks its fields; that is
  the caller's cost, not dispatch's).

Both go in batches of `--batch`. Rounds interleave the two (and swap their
order each round), every measurement starts on an empty queue, and medians
are reported, because a shared machine drifts by more than the difference
being measured.

    .venv/bin/python -m bench.studies.dispatch_cost
    .venv/bin/python -m bench.studies.dispatch_cost --url memory:// --url sqlite \\
        --url redis://127.0.0.1:6379/0 --jobs 100000 --rounds 5

`sqlite` means a fresh temporary file per measurement; a Redis URL gets a
fresh prefix per measurement, deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from uuid import UUID

from rainier_queue import Job, JobContext, QueueManager
from rainier_queue.connections import open_queue
from rainier_queue.packing import build_envelope
from rainier_queue.queue import Queue

DEFAULT_URLS = ("memory://", "sqlite", "redis://127.0.0.1:6379/0")


class Priority(enum.Enum):
    LOW = "low"
    NORMAL = "normal"


@dataclass
class Line:
    sku: str
    quantity: int
    price: Decimal


class SendInvoice(Job):
    """A realistic shape: ids, money, times, a nested list of records, an optional."""

    name = "bench-send-invoice"
    invoice_id: UUID
    customer_id: int
    email: str
    total: Decimal
    due: date
    issued_at: datetime
    lines: list[Line]
    tags: list[str]
    note: str | None = None
    priority: Priority = Priority.NORMAL

    async def handle(self, ctx: JobContext) -> None:
        return None


def make_jobs(count: int) -> list[Job]:
    """`count` invoices, each a little different."""
    issued = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)
    return [
        SendInvoice(
            invoice_id=UUID(int=n),
            customer_id=n % 977,
            email=f"customer{n}@example.com",
            total=Decimal("59.97"),
            due=date(2027, 1, 2),
            issued_at=issued,
            lines=[Line(sku=f"SKU-{n % 50}", quantity=3, price=Decimal("19.99"))],
            tags=["monthly", "eu"],
            note=None if n % 2 else "thanks",
        )
        for n in range(count)
    ]


@contextmanager
def fresh_url(url: str) -> Iterator[str]:
    """`url` on an empty queue: a new SQLite file, or a new Redis prefix removed afterwards."""
    if url == "sqlite":
        with tempfile.TemporaryDirectory(prefix="rq-dispatch-cost-") as folder:
            yield f"sqlite:///{Path(folder) / 'jobs.db'}"
        return
    if url.startswith(("redis://", "rediss://")):
        prefix = f"rq-bench-{uuid.uuid4().hex[:8]}:"
        yield f"{url}{'&' if '?' in url else '?'}prefix={prefix}"
        asyncio.run(_delete_prefix(url, prefix))
        return
    yield url


async def _delete_prefix(url: str, prefix: str) -> None:
    import redis.asyncio as redis

    client = redis.Redis.from_url(url.split("?")[0])
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for i in range(0, len(keys), 1000):
            await client.delete(*keys[i : i + 1000])
    finally:
        await client.aclose()


async def _timed(url: str, run: Callable[[Queue], Awaitable[None]]) -> float:
    queue = open_queue(url)
    try:
        await queue.size("default")  # connect and create tables outside the timing
        started = time.perf_counter()
        await run(queue)
        return time.perf_counter() - started
    finally:
        await queue.aclose()


def measure_push(url: str, jobs: list[Job], batch: int) -> float:
    envelopes = [build_envelope(job) for job in jobs]

    async def run(queue: Queue) -> None:
        for i in range(0, len(envelopes), batch):
            await queue.push_many(envelopes[i : i + batch])

    with fresh_url(url) as target:
        return asyncio.run(_timed(target, run))


def measure_dispatch(url: str, jobs: list[Job], batch: int) -> float:
    async def run(queue: Queue) -> None:
        manager = QueueManager(queue)
        for i in range(0, len(jobs), batch):
            await manager.dispatch_many(jobs[i : i + batch])

    with fresh_url(url) as target:
        return asyncio.run(_timed(target, run))


def reachable(url: str) -> str | None:
    """None if `url` can be used here, else why not."""
    try:
        with fresh_url(url) as target:
            asyncio.run(_timed(target, lambda queue: queue.push_many([])))  # type: ignore[arg-type]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.studies.dispatch_cost", description=__doc__
    )
    parser.add_argument("--url", action="append", help="memory://, sqlite or a server URL")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="jobs per bulk call")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    jobs = make_jobs(args.jobs)
    print(f"{args.jobs:,} jobs in batches of {args.batch}, medians of {args.rounds} rounds")
    print(f"{'backend':<28} {'push_many':>12} {'dispatch_many':>14} {'ratio':>7}")
    for url in args.url or DEFAULT_URLS:
        why = reachable(url)
        if why is not None:
            print(f"{url:<28} skipped: {why}")
            continue
        pushes: list[float] = []
        dispatches: list[float] = []
        for n in range(args.rounds):
            order = [(pushes, measure_push), (dispatches, measure_dispatch)]
            for times, measure in order if n % 2 == 0 else order[::-1]:
                times.append(measure(url, jobs, args.batch))
        push, dispatch = statistics.median(pushes), statistics.median(dispatches)
        per_push, per_dispatch = push / args.jobs * 1e6, dispatch / args.jobs * 1e6
        print(
            f"{url:<28} {per_push:>9.2f} µs {per_dispatch:>11.2f} µs {dispatch / push:>6.2f}x",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

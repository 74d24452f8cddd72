# SPDX-License-Identifier: MIT
"""What reserving ahead is worth when the broker is a network round trip away.

On this machine every broker is on loopback, a tenth of a millisecond away,
and the comparison benchmark keeps both cores busy, so a worker rarely waits
for a reserve there. In production a broker is often half a millisecond or
more away, and a worker whose jobs are quick then waits for every batch.
This models that: the memory driver with every reserve and acknowledgement
delayed by `--rtt` milliseconds, N no-op jobs drained by one in-process
worker, once with `reserve_ahead=0` and once with the default, interleaved.

    .venv/bin/python -m bench.studies.reserve_ahead --rtt 0.5 --rtt 1 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

from typing_extensions import override

from rainier_queue import Worker, WorkerOptions
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.queue import Reservation

from ..drain import envelopes
from ..noop_jobs import registry


class RemoteMemory(MemoryQueue):
    """The memory driver, with a round trip's delay on every reserve and acknowledgement."""

    def __init__(self, rtt: float) -> None:
        super().__init__()
        self.rtt = rtt

    @override
    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        await asyncio.sleep(self.rtt)
        return await super().reserve(queue, limit=limit)

    @override
    async def acknowledge_many(self, reservations: Sequence[Reservation]) -> list[Exception | None]:
        await asyncio.sleep(self.rtt)
        return await super().acknowledge_many(reservations)


async def drain(rtt: float, jobs: int, concurrency: int, ahead: int | None) -> float:
    """Jobs per second through one worker on a broker `rtt` seconds away."""
    queue = RemoteMemory(rtt)
    batch = envelopes(jobs)
    for i in range(0, jobs, 1000):
        await MemoryQueue.push_many(queue, batch[i : i + 1000])
    options = WorkerOptions(concurrency=concurrency, stop_when_empty=True, reserve_ahead=ahead)
    worker = Worker(queue, registry, options)
    started = time.perf_counter()
    stats = await worker.run()
    elapsed = time.perf_counter() - started
    if stats.processed != jobs:
        raise SystemExit(f"processed {stats.processed} of {jobs}")
    return jobs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rtt", type=float, action="append", help="ms, repeatable [0.5, 1]")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.jobs:,} no-op jobs, concurrency {args.concurrency}, medians of {args.rounds}")
    print(f"{'rtt ms':>7}{'ahead off jobs/s':>18}{'ahead on jobs/s':>17}{'ratio':>8}")
    for rtt in args.rtt or [0.5, 1.0]:
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.rounds):
            off.append(asyncio.run(drain(rtt / 1000, args.jobs, args.concurrency, 0)))
            on.append(asyncio.run(drain(rtt / 1000, args.jobs, args.concurrency, None)))
        a, b = statistics.median(off), statistics.median(on)
        print(f"{rtt:>7g}{a:>18,.0f}{b:>17,.0f}{b / a:>7.2f}x")


if __name__ == "__main__":
    main()
